package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// reboot resets GPUs (every GPU and compute instance gone, a pending MIG
// mode applied) and starts a new agent process over the same NVML and
// journal, as a node's reboot does.
func (g *rig) reboot(t *testing.T, gpus ...int) {
	t.Helper()
	for _, i := range gpus {
		if err := g.sim.ResetGPU(i); err != nil {
			t.Fatal(err)
		}
	}
	g.restart(t)
}

// TestRestoreHeldAfterReboot: GPU instances do not outlive a reboot or a
// GPU reset, while ResourceClaims keep their allocations. The devices the
// claims hold are made again before anything is planned over their
// placements, whether a spec lists the GPU or not; a claim the API server
// no longer shows allocated makes nothing. The H100 comes back with MIG mode
// off (the simulator's ResetGPU on Hopper): it is turned on again for the
// held device.
func TestRestoreHeldAfterReboot(t *testing.T) {
	tests := map[string]restoreCase{
		"layout blocked on the held device": {
			desired:    []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")},
			wantLayout: "3g.40gb@4", wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse,
		},
		"reset, layout blocked on the held device": {
			desired: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, reset: true,
			wantLayout: "3g.40gb@4", wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse,
		},
		"layout holding the held device": {
			desired:    []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")},
			wantLayout: "3g.40gb@0,3g.40gb@4", wantPhase: v1alpha1.PhaseReady, wantReason: v1alpha1.ReasonLayoutApplied,
		},
		"GPU no spec lists": {
			wantLayout: "3g.40gb@4",
		},
		"released since, the cache behind": {
			desired: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, live: sets.New[string](),
			wantLayout: "3g.40gb@0,2g.20gb@4,1g.10gb@6", wantPhase: v1alpha1.PhaseReady, wantReason: v1alpha1.ReasonLayoutApplied,
		},
	}
	for _, model := range []string{"A100-SXM4-80GB", "H100-SXM5-80GB"} {
		for name, tc := range tests {
			t.Run(model+"/"+name, func(t *testing.T) { tc.run(t, model) })
		}
	}
}

// restoreCase is a case of TestRestoreHeldAfterReboot: a claim holds
// gpu-0-mig-3g40gb-9-4 of the layout 3g.40gb@0,3g.40gb@4 when the GPU is
// reset.
type restoreCase struct {
	// desired is the spec of the passes (nil: no NodeMigLayout).
	desired []v1alpha1.GPUSpec
	// live is what the API server shows allocated (nil: as cached).
	live sets.Set[string]
	// reset: a GPU reset with the agent running, not a reboot.
	reset      bool
	wantLayout string
	wantPhase  v1alpha1.GPUPhase
	wantReason string
}

func (tc restoreCase) run(t *testing.T, model string) {
	const held = "gpu-0-mig-3g40gb-9-4"
	g := newRig(t, "1x"+model)
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New(held)
	g.prep.names.Insert(held)
	if _, err := g.r.Sync(t.Context(), tc.desired, nil); err != nil {
		t.Fatal(err)
	}
	g.alloc.live = tc.live
	if tc.reset {
		if err := g.sim.ResetGPU(0); err != nil {
			t.Fatal(err)
		}
	} else {
		g.reboot(t, 0)
	}
	// Ampere keeps MIG mode across the reset, Hopper loses it.
	if on, want := g.sim.Snapshot().GPUs[0].MIGCurrent, strings.HasPrefix(model, "A100"); on != want {
		t.Fatalf("MIG mode after the reset %v, want %v", on, want)
	}
	if tc.live != nil {
		g.prep.names.Delete(held)
	}
	res, err := g.r.Sync(t.Context(), tc.desired, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, tc.wantLayout)
	if tc.desired != nil {
		got := res.Results[0]
		if got.Phase != tc.wantPhase || got.Reason != tc.wantReason {
			t.Errorf("GPU 0: %+v, want %s/%s", got, tc.wantPhase, tc.wantReason)
		}
	}
	if tc.live == nil {
		if inUse := res.InUse[0].String(); inUse != "3g.40gb@4" {
			t.Errorf("in use %q, want only the held device", inUse)
		}
		if !slices.Contains(g.inv.last().devices, held) {
			t.Errorf("%s not published after the pass: %v", held, g.inv.last().devices)
		}
	}
	if diff := cmp.Diff([]JournalEntry{}, g.r.Journal.Entries()); tc.wantPhase != v1alpha1.PhaseBlocked && diff != "" {
		t.Errorf("journal left (-want +got):\n%s", diff)
	}
}

// TestRestoreHeldSkipsTakenPlacement: a held name whose placement another
// device holds now (a claim allocated from a publication older than the
// change that replaced the device) makes nothing, and the device there
// stays; the allocation stays unknown, so no device of the GPU is
// destroyed for the spec.
func TestRestoreHeldSkipsTakenPlacement(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-4")
	want := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	res, err := g.r.Sync(t.Context(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonUnknownAllocation {
		t.Errorf("GPU 0: %+v, want Blocked/UnknownAllocation", got)
	}
}

// TestRestoreHeldFailedLeavesGPU: where NVML refuses to make a held device
// again, the GPU is not repartitioned that pass (its layout would take the
// placement), says why, and the next pass makes the device.
func TestRestoreHeldFailedLeavesGPU(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New(held)
	want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}
	g.reboot(t, 0)
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "")
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || !strings.Contains(got.Message, held) || !res.Retry {
		t.Errorf("GPU 0: %+v (retry %v), want Failed naming %s, retried", got, res.Retry, held)
	}
	res, err = g.r.Sync(t.Context(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "3g.40gb@4")
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonDeviceInUse {
		t.Errorf("GPU 0 on the retry: %+v, want Blocked/DeviceInUse", got)
	}
}
