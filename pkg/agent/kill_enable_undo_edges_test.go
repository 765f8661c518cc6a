package agent

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestMIGModeNotTheAgentsToTurnOff: a GPU in MIG mode without GPU
// instances, with a journal entry and no spec, whose emptiness the agent's
// work did not make (it turned no MIG mode on and destroyed nothing), keeps
// MIG mode on once the work is gone: an administrator's A100 whose devices a
// reboot lost, after a restore that failed or was killed before its create;
// a GPU a spec had in MIG mode without devices, after a layout's create
// failed. The same sequences without the failure or the kill also keep it.
func TestMIGModeNotTheAgentsToTurnOff(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	cases := map[string]func(t *testing.T, g *rig){
		"administrator's A100, restore failed": func(t *testing.T, g *rig) {
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.alloc.cached = sets.New(held)
			g.reboot(t, 0)
			if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
				t.Fatal(err)
			}
			res, err := g.r.Sync(t.Context(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Results[0].Phase == v1alpha1.PhaseReady {
				t.Fatalf("restore not failed: %+v", res.Results[0])
			}
		},
		"administrator's A100, restore killed before its create": func(t *testing.T, g *rig) {
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.alloc.cached = sets.New(held)
			g.reboot(t, 0)
			cm := &killingManager{Manager: g.mgr, at: 1}
			g.r.GPUs = cm
			if died, err := syncUntilKilled(g.r, nil); !died {
				t.Fatalf("not killed: %v (ops %v)", err, cm.ops)
			}
			g.restart(t)
		},
		"MIG mode without devices asked for, a create failed": func(t *testing.T, g *rig) {
			g.syncReady(t, []v1alpha1.GPUSpec{spec(0, "")})
			if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
				t.Fatal(err)
			}
			res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Results[0].Phase == v1alpha1.PhaseReady || len(g.r.Journal.Entries()) == 0 {
				t.Fatalf("create not failed, or no entry kept: %+v", res.Results[0])
			}
		},
	}
	for name, setup := range cases {
		for _, hw := range []string{"1xA100-SXM4-80GB", "1xH100-SXM5-80GB"} {
			if name != "MIG mode without devices asked for, a create failed" && hw != "1xA100-SXM4-80GB" {
				continue // MIG mode outlives a reboot on Ampere only
			}
			t.Run(name+"/"+hw, func(t *testing.T) {
				g := newRig(t, hw)
				setup(t, g)
				_ = g.sim.ClearFaults()
				g.alloc.cached = sets.New[string]() // the claim released, the spec gone
				g.prep.names.Delete(held)
				for range 2 {
					if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || !st.MIGPending {
					t.Errorf("MIG mode current %v pending %v, want left on", st.MIGCurrent, st.MIGPending)
				}
			})
		}
	}
}

// TestEmptiedGPUTurnedOffWithTheCacheBehind: the restore's enable is
// killed, the claim released, and in the first pass after the restart the
// agent's cache still shows the claim. The API server's answer counts: MIG
// mode is turned off in that pass, before the journal entry that tells the
// agent emptied the GPU goes at its end.
func TestEmptiedGPUTurnedOffWithTheCacheBehind(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New(held)
	g.reboot(t, 0)
	cm := &killingManager{Manager: g.mgr, at: 1, after: true}
	g.r.GPUs = cm
	if died, err := syncUntilKilled(g.r, nil); !died {
		t.Fatalf("not killed: %v (ops %v)", err, cm.ops)
	}
	g.restart(t)
	g.alloc.live = sets.New[string]()
	if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent {
		t.Errorf("MIG mode left on without devices (journal %+v, published %v)", g.r.Journal.Entries(), g.inv.last().devices)
	}
}

// TestEmptiedGPUWhoseModeChangeWaits: an A100 whose board cannot reset it
// (NoGPUReset) is emptied by a relayout killed between its destroys and its
// creates, and the spec is gone by the restart. Turning MIG mode off would
// wait for the next reboot, untracked: the change is cancelled again, so
// that no mode change is left pending, and the GPU stays in MIG mode.
func TestEmptiedGPUWhoseModeChangeWaits(t *testing.T) {
	g := emptiedA100(t, true)
	after, emptied := g.restartWithoutSpecs(t, 3)
	st := g.sim.Snapshot().GPUs[0]
	if !st.MIGCurrent || !st.MIGPending {
		t.Errorf("MIG mode current %v pending %v after ops %v, want on, none pending", st.MIGCurrent, st.MIGPending, after.ops)
	}
	if diff := cmp.Diff([]map[int]bool{{0: false}, nil, nil}, emptied); diff != "" {
		t.Errorf("what the passes did to emptied GPUs (-want +got):\n%s", diff)
	}
}

// emptiedA100 is a rig of an A100 in MIG mode (whose board cannot reset it,
// with noReset) whose agent was killed in a relayout from two 3g.40gb to a
// 7g.80gb between its destroys and its create: the GPU is in MIG mode
// without GPU instances, the journal entry says the agent emptied it.
func emptiedA100(t *testing.T, noReset bool) *rig {
	t.Helper()
	g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", NoGPUReset: noReset})
	if _, err := g.mgr.SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	cm := &killingManager{Manager: g.mgr, at: 2, after: true}
	g.r.GPUs = cm
	if died, err := syncUntilKilled(g.r, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}); !died {
		t.Fatalf("not killed: %v (ops %v)", err, cm.ops)
	}
	return g
}
