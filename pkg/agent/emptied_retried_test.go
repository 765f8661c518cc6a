package agent

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestEmptiedGPUTurnedOffAfterRetries: the agent's work empties a GPU
// (every device destroyed), fails before it makes the new ones, and is
// retried; the retry's plan has nothing left to destroy, so its journal
// entry lists no destroys. The retry fails too, is killed, or stops before
// its NVML work (the spec read again asks for another layout); then no
// spec asks for the GPU any more. The GPU must still be known as emptied by
// the agent: MIG mode off, the whole GPU published, as after a single
// failure. Without the record carried over (JournalEntry.Emptied), it
// stayed in MIG mode without GPU instances, published as nothing, until a
// spec asked for it again.
func TestEmptiedGPUTurnedOffAfterRetries(t *testing.T) {
	failNext := func(t *testing.T, g *rig, op string) {
		t.Helper()
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: op, Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
	}
	relayout := []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4")}
	disable := []v1alpha1.GPUSpec{{Index: 0}}
	tests := map[string]struct {
		hw, from string
		specs    []v1alpha1.GPUSpec
		failOp   string // the NVML call that fails in the first pass
		retry    func(t *testing.T, g *rig, specs []v1alpha1.GPUSpec)
	}{
		"single failure": {hw: "1xH100-SXM5-80GB", from: "7g.80gb@0", specs: relayout, failOp: "CreateGpuInstanceWithPlacement"},
		"create fails again": {
			hw: "1xA100-SXM4-80GB", from: "7g.80gb@0", specs: relayout, failOp: "CreateGpuInstanceWithPlacement",
			retry: func(t *testing.T, g *rig, specs []v1alpha1.GPUSpec) {
				failNext(t, g, "CreateGpuInstanceWithPlacement")
				if res, err := g.r.Sync(t.Context(), specs, nil); err != nil || res.Results[0].Phase == v1alpha1.PhaseReady {
					t.Fatalf("retry: %+v, %v; want its create failed", res, err)
				}
			},
		},
		"killed in the retry's create": {
			hw: "1xH100-SXM5-80GB", from: "7g.80gb@0", specs: relayout, failOp: "CreateGpuInstanceWithPlacement",
			retry: func(t *testing.T, g *rig, specs []v1alpha1.GPUSpec) {
				g.r.GPUs = &killingManager{Manager: g.mgr, at: 1}
				if died, err := syncUntilKilled(g.r, specs); !died {
					t.Fatalf("retry not killed: %v", err)
				}
				g.restart(t)
			},
		},
		"the retry's spec read again asks for another layout": {
			hw: "1xA100-SXM4-80GB", from: "7g.80gb@0", specs: relayout, failOp: "CreateGpuInstanceWithPlacement",
			retry: func(t *testing.T, g *rig, specs []v1alpha1.GPUSpec) {
				g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) {
					return []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil
				}
				defer func() { g.r.Reread = nil }()
				if res, err := g.r.Sync(t.Context(), specs, nil); err != nil || res.Results[0].Phase == v1alpha1.PhaseReady {
					t.Fatalf("retry: %+v, %v; want it stopped before its NVML work", res, err)
				}
			},
		},
		"a disable whose mode change fails twice": {
			hw: "1xH100-SXM5-80GB", from: "3g.40gb@0,3g.40gb@4", specs: disable, failOp: "SetMigMode",
			retry: func(t *testing.T, g *rig, specs []v1alpha1.GPUSpec) {
				failNext(t, g, "SetMigMode")
				if res, err := g.r.Sync(t.Context(), specs, nil); err != nil || res.Results[0].Phase == v1alpha1.PhaseReady {
					t.Fatalf("retry: %+v, %v; want its mode change failed", res, err)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, tc.hw)
			g.setup(t, 0, tc.from)
			failNext(t, g, tc.failOp)
			if res, err := g.r.Sync(t.Context(), tc.specs, nil); err != nil || res.Results[0].Phase == v1alpha1.PhaseReady {
				t.Fatalf("first pass: %+v, %v; want it failed", res, err)
			}
			if err := g.sim.ClearFaults(); err != nil {
				t.Fatal(err)
			}
			if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || len(st.GPUInstances) != 0 {
				t.Fatalf("after the first pass: MIG %v, %d GPU instances; want MIG on and none (the GPU emptied)", st.MIGCurrent, len(st.GPUInstances))
			}
			if tc.retry != nil {
				tc.retry(t, g, tc.specs)
				if err := g.sim.ClearFaults(); err != nil {
					t.Fatal(err)
				}
			}
			// No spec asks for the GPU any more (the MigLayout deleted).
			for range 2 {
				if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			st := g.sim.Snapshot().GPUs[0]
			if got := g.inv.last().devices; st.MIGCurrent || !cmp.Equal(got, []string{"gpu-0"}) {
				t.Errorf("MIG mode %v with %d GPU instances, published %v; want MIG off and the whole GPU published (gpu-0)", st.MIGCurrent, len(st.GPUInstances), got)
			}
			if e := g.r.Journal.Entries(); len(e) != 0 {
				t.Errorf("journal entries left: %+v", e)
			}
		})
	}
}
