package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// unknownHandle answers ERROR_UNKNOWN for the handle of GPU idx while *on:
// what nvidia-smi shows as "Unable to determine the device handle for GPU
// ...: Unknown Error" after an Xid 79 or a GSP failure, until a reset.
type unknownHandle struct {
	nvml.Interface
	idx int
	on  *bool
}

func (u unknownHandle) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if *u.on && i == u.idx {
		return nil, nvml.ERROR_UNKNOWN
	}
	return u.Interface.DeviceGetHandleByIndex(i)
}

// TestGPUWhoseReadsKeepFailingIsUnreadable: GPU 1 answers ERROR_UNKNOWN,
// an error that may pass. The passes of the next minute fail as a whole,
// the pool as published (a sound GPU's devices are never withdrawn for one
// odd answer); once its reads have failed for StuckReadAfter, GPU 1 is
// unreadable: its devices withdrawn, GPUUnreadable saying since when, and
// GPU 0's change waits no longer. Read again, GPU 1 is published again.
func TestGPUWhoseReadsKeepFailingIsUnreadable(t *testing.T) {
	ctx := context.Background()
	failing := false
	g := newRigOver(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB"}, func(l nvml.Interface) nvml.Interface {
		return unknownHandle{Interface: l, idx: 1, on: &failing}
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.r.Now = func() time.Time { return now }
	specs := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")}
	if _, err := g.r.Sync(ctx, specs, nil); err != nil {
		t.Fatal(err)
	}
	gpu1 := func(devices []string) []string {
		return slices.DeleteFunc(slices.Clone(devices), func(d string) bool { return !strings.HasPrefix(d, "gpu-1-") })
	}
	before := gpu1(g.inv.last().devices)
	if len(before) != 2 {
		t.Fatalf("GPU 1 published %v, want its two devices", before)
	}

	failing = true
	specs[0] = spec(0, "7g.80gb@0")
	start := now
	for _, after := range []time.Duration{0, 30 * time.Second, StuckReadAfter - time.Second} {
		now = start.Add(after)
		pubs := len(g.inv.pubs)
		if _, err := g.r.Sync(ctx, specs, nil); err == nil {
			t.Fatalf("pass %v into the failures succeeded, want it failed as a whole", after)
		}
		if len(g.inv.pubs) != pubs {
			t.Fatalf("a failed pass %v into the failures published %v", after, g.inv.last().devices)
		}
	}

	now = now.Add(time.Second)
	res, err := g.r.Sync(ctx, specs, nil)
	if err != nil {
		t.Fatalf("pass a minute into the failures: %v", err)
	}
	got := res.Results[1]
	if got.Reason != v1alpha1.ReasonGPUUnreadable || !strings.Contains(got.Message, "failing since") {
		t.Errorf("GPU 1 %+v, want GPUUnreadable saying since when its reads fail", got)
	}
	if left := gpu1(g.inv.last().devices); len(left) > 0 {
		t.Errorf("GPU 1's devices still published: %v", left)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0 %+v, want its change made (Ready)", got)
	}

	failing = false
	now = now.Add(time.Second)
	if _, err := g.r.Sync(ctx, specs, nil); err != nil {
		t.Fatal(err)
	}
	if again := gpu1(g.inv.last().devices); !slices.Equal(again, before) {
		t.Errorf("GPU 1 published %v once read again, want %v", again, before)
	}
	g.wantLayouts(t, "7g.80gb@0", "3g.40gb@0,3g.40gb@4")
	// A new failure starts a new count.
	failing = true
	if _, err := g.r.Sync(ctx, specs, nil); err == nil {
		t.Errorf("pass at a new failure succeeded, want it failed as a whole")
	}
}

// failingMIGDevices fails the MIG device listing of GPU idx with
// ERROR_UNKNOWN while *on.
type failingMIGDevices struct {
	gpu.Manager
	idx int
	on  *bool
}

func (f failingMIGDevices) MIGDevices(ctx context.Context, i int) ([]gpu.MIGDevice, error) {
	if *f.on && i == f.idx {
		return nil, &gpu.NVMLError{Op: "nvmlDeviceGetGpuInstances", Return: nvml.ERROR_UNKNOWN}
	}
	return f.Manager.MIGDevices(ctx, i)
}

// TestStuckReadsCountFailuresInARow: GPU 1's MIG device listing, failing
// for StuckReadAfter, makes it unreadable, as its handle would; but a
// failure of it an observation did not follow with another (cut short by
// GPU 0's failing handle, which never reached GPU 1) starts no count: one
// odd answer a minute later withdraws nothing.
func TestStuckReadsCountFailuresInARow(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (g *rig, handle0, list1 *bool, now *time.Time, specs []v1alpha1.GPUSpec) {
		handle0, list1 = new(bool), new(bool)
		g = newRigOver(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB"}, func(l nvml.Interface) nvml.Interface {
			return unknownHandle{Interface: l, idx: 0, on: handle0}
		})
		now = new(time.Time)
		*now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		g.r.Now = func() time.Time { return *now }
		g.r.GPUs = failingMIGDevices{Manager: g.r.GPUs, idx: 1, on: list1}
		specs = []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")}
		if _, err := g.r.Sync(ctx, specs, nil); err != nil {
			t.Fatal(err)
		}
		return g, handle0, list1, now, specs
	}
	t.Run("MIG device listing failing a minute", func(t *testing.T) {
		g, _, list1, now, specs := setup(t)
		*list1 = true
		start := *now
		for _, after := range []time.Duration{0, 30 * time.Second, StuckReadAfter - time.Second} {
			*now = start.Add(after)
			if _, err := g.r.Sync(ctx, specs, nil); err == nil {
				t.Fatalf("pass %v into the failures succeeded, want it failed as a whole", after)
			}
		}
		*now = start.Add(StuckReadAfter)
		res, err := g.r.Sync(ctx, specs, nil)
		if err != nil {
			t.Fatalf("pass a minute into the failures: %v", err)
		}
		if got := res.Results[1]; got.Reason != v1alpha1.ReasonGPUUnreadable || !strings.Contains(got.Message, "listing MIG devices") {
			t.Errorf("GPU 1 %+v, want GPUUnreadable naming its MIG device listing", got)
		}
	})
	t.Run("failures not in a row", func(t *testing.T) {
		g, handle0, list1, now, specs := setup(t)
		start := *now
		*list1 = true
		if _, err := g.r.Sync(ctx, specs, nil); err == nil {
			t.Fatal("pass with GPU 1's listing failing succeeded, want it failed as a whole")
		}
		*list1, *handle0 = false, true
		for s := time.Second; s < StuckReadAfter; s += 5 * time.Second {
			*now = start.Add(s)
			_, _ = g.r.Sync(ctx, specs, nil)
		}
		// GPU 0 is unreadable by now; GPU 1's listing fails once more.
		*now = start.Add(StuckReadAfter + 2*time.Second)
		*list1 = true
		res, err := g.r.Sync(ctx, specs, nil)
		if err == nil && res.Results[1].Reason == v1alpha1.ReasonGPUUnreadable {
			t.Errorf("GPU 1 withdrawn at its first failure after a minute of not being listed: %s", res.Results[1].Message)
		}
	})
}
