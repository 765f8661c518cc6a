package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestDrainedDevicesWithdrawnBeforeAnyDestroy: a pass repartitions GPUs 0
// and 1. When GPU 1's change takes its lock, GPU 0's devices are destroyed
// already; the pool published then (the one a claim tolerating the drain
// taint could be allocated from) names none of the drained devices of
// either GPU, nor did any publication since the drain's. The pass ends
// with the pool from NVML.
func TestDrainedDevicesWithdrawnBeforeAnyDestroy(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0,3g.40gb@4")
	var atGPU1 publication
	g.locks.onBegin = func() {
		if len(g.locks.begun) == 2 {
			atGPU1 = g.inv.last()
		}
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for idx, r := range res.Results {
		if r.Phase != v1alpha1.PhaseReady {
			t.Fatalf("GPU %d %s/%s (%s), want Ready", idx, r.Phase, r.Reason, r.Message)
		}
	}
	drained := []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-1-mig-3g40gb-9-0", "gpu-1-mig-3g40gb-9-4"}
	if slices.ContainsFunc(atGPU1.devices, func(d string) bool { return slices.Contains(drained, d) }) {
		t.Errorf("published while GPU 1 is repartitioned (GPU 0's devices destroyed): %v, want none of the drained %v", atGPU1.devices, drained)
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-7g80gb-0-0", "gpu-1-mig-7g80gb-0-0"}, g.inv.last().devices); diff != "" {
		t.Errorf("the pass's last publication (-want +got):\n%s", diff)
	}
}

// TestWithdrawnDevicesStayWithdrawnWhenTheFinalReadFails: NVML fails the
// read that ends the pass (after GPU 0's devices were destroyed); the pass
// fails, and the last publication names no destroyed device (before the
// withdrawal, the drain publication stood, naming them, until a pass could
// read NVML again).
func TestWithdrawnDevicesStayWithdrawnWhenTheFinalReadFails(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.locks.onBegin = func() {
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "DeviceGetCount", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
		t.Fatal("the pass succeeded although NVML failed its final read: the test shows nothing")
	}
	if diff := cmp.Diff([]string{"7g.80gb@0"}, g.layouts(t)); diff != "" {
		t.Fatalf("layouts (-want +got): the change was not made, the test shows nothing\n%s", diff)
	}
	if last := g.inv.last(); len(last.devices) != 0 {
		t.Errorf("last publication %+v after the pass failed, want no device (the drained ones destroyed, the new one not read)", last)
	}
}

// TestWholeGPUWithdrawnBeforeMIGGoesOn: a GPU published whole (MIG off)
// that a spec asks to split is left out of the pool before MIG mode goes
// on; a withdrawal the API server refuses fails the pass before any NVML
// step, the GPU left whole.
func TestWholeGPUWithdrawnBeforeMIGGoesOn(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.inv.failWithdraw = errors.New("the API server is unavailable")
	if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
		t.Fatal("the pass succeeded although the withdrawal failed")
	}
	if diff := cmp.Diff([]string{"-"}, g.layouts(t)); diff != "" {
		t.Errorf("after the failed withdrawal (-want +got): the GPU was touched\n%s", diff)
	}
	g.inv.failWithdraw = nil
	var atEnable publication
	g.locks.onBegin = func() { atEnable = g.inv.last() }
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(atEnable.devices, "gpu-0") {
		t.Errorf("published when MIG mode goes on: %v, want gpu-0 withdrawn", atEnable.devices)
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-7g80gb-0-0"}, g.inv.last().devices); diff != "" {
		t.Errorf("the pass's last publication (-want +got):\n%s", diff)
	}
}

// stopOnWithdrawal is a fakeInventory whose withdrawal publication (the
// one after the drain's) is written, then interrupted by the agent's stop.
type stopOnWithdrawal struct {
	*fakeInventory
	stop func()
}

func (s *stopOnWithdrawal) Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error {
	withdrawal := draining.Len() == 0 && len(s.pubs) > 0 && len(s.last().draining) > 0
	err := s.fakeInventory.Publish(ctx, gpus, draining)
	if stop := s.stop; withdrawal && stop != nil {
		s.stop = nil
		stop()
		return ctx.Err()
	}
	return err
}

// TestStopDuringWithdrawalRestoresThePool: the agent is stopped while its
// withdrawal is being served: no NVML step is taken, and the pool is
// published again as NVML has it, rather than left without the devices it
// withdrew (which exist) until the next agent starts.
func TestStopDuringWithdrawalRestoresThePool(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g.r.Inventory = &stopOnWithdrawal{fakeInventory: g.inv, stop: cancel}
	if _, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
		t.Fatal("the pass succeeded although stopped during its withdrawal")
	}
	if diff := cmp.Diff([]string{"3g.40gb@0,3g.40gb@4"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got): an NVML step was taken after the failed withdrawal\n%s", diff)
	}
	want := publication{devices: []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}}
	if diff := cmp.Diff(want, g.inv.last(), cmp.AllowUnexported(publication{})); diff != "" {
		t.Errorf("last publication (-want +got): the pool is left without devices that exist\n%s", diff)
	}
}

// TestFailedDrainUntaintsThePool: a pass that stops between its drain
// publication and its withdrawal (the publication fails after it may have
// been written: binding conditions the API server drops, a refusal or a
// timeout alike; or the allocations cannot be read live after the settle
// period) takes no NVML step and publishes the pool again untainted, pass
// after pass, rather than leave the tainted devices, which exist and stay,
// kept from every new claim for as long as the failure lasts.
func TestFailedDrainUntaintsThePool(t *testing.T) {
	for name, fail := range map[string]func(g *rig){
		"drain publication": func(g *rig) {
			g.inv.failDrain = fmt.Errorf("waiting for the API server to serve pool n1: %w", ErrBindingConditionsDropped)
		},
		"live read of the allocations": func(g *rig) {
			g.alloc.failLive = errors.New("listing ResourceClaims: the server is currently unable to handle the request")
		},
	} {
		t.Run(name, func(t *testing.T) { failedDrainUntaints(t, fail) })
	}
}

func failedDrainUntaints(t *testing.T, fail func(g *rig)) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	fail(g)
	want := publication{devices: []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}}
	for pass := range 2 {
		if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
			t.Fatalf("pass %d succeeded although its drain publication failed", pass)
		}
		if diff := cmp.Diff([]string{"3g.40gb@0,3g.40gb@4"}, g.layouts(t)); diff != "" {
			t.Errorf("pass %d: layouts (-want +got): an NVML step was taken after the failed drain\n%s", pass, diff)
		}
		if diff := cmp.Diff(want, g.inv.last(), cmp.AllowUnexported(publication{})); diff != "" {
			t.Errorf("pass %d: last publication (-want +got): the devices stay tainted\n%s", pass, diff)
		}
	}
}
