package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestPendingMIGModeLeftWhenSpecGoes: on an Ampere GPU the agent
// enables MIG for the spec; a process that starts on the GPU after the
// drain's re-check (outside any claim) leaves the change pending
// (Blocked/ResetRequired). The NodeMigLayout is then deleted (its MigLayout
// removed: nothing asks for MIG any more). The pending enable is the
// agent's own half-done step, recorded in its journal (SettingMIGMode): the
// first pass without a spec cancels it, as a spec asking for MIG off does
// (TestSyncCancelsRevertedMIGMode), and the whole GPU is published
// untainted; left pending, the GPU would stay tainted (no claim can get it)
// and its next reset turn MIG on for nobody.
func TestPendingMIGModeLeftWhenSpecGoes(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.leaveEnablePending(t)
	// The NodeMigLayout is deleted: the agent's passes ask for nothing.
	g.wantPendingModeCancelled(t)
}

// TestPendingMIGModeKeptThroughInterruptedPass: as
// TestPendingMIGModeLeftWhenSpecGoes, but a retry pass drains the GPU
// again (the process gone) and stops before its NVML work. Its journal
// entries (Draining, then the end of the pass) must not lose the record of
// the mode the agent set: once the NodeMigLayout is deleted, the pending
// enable is still cancelled.
func TestPendingMIGModeKeptThroughInterruptedPass(t *testing.T) {
	tests := map[string]struct {
		// interrupt sets the retry pass up to stop before NVML work.
		interrupt func(g *rig)
		want      string // the retry pass's GPU result reason
	}{
		"spec deleted during the settle period": {
			interrupt: func(g *rig) {
				g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) { return nil, nil }
			},
			want: "Pending",
		},
		"device prepared during the settle period": {
			interrupt: func(g *rig) {
				g.locks.onBegin = func() { g.prep.names.Insert("gpu-0") }
			},
			want: v1alpha1.ReasonDeviceInUse,
		},
		"device allocated during the settle period": {
			interrupt: func(g *rig) {
				g.r.Sleep = func(context.Context, time.Duration) error {
					g.alloc.live = sets.New("gpu-0")
					return nil
				}
			},
			want: v1alpha1.ReasonDeviceInUse,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			ctx := context.Background()
			specs := g.leaveEnablePending(t)
			tc.interrupt(g)
			res, err := g.r.Sync(ctx, specs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Reason != tc.want {
				t.Fatalf("retry pass: %+v, want reason %s", got, tc.want)
			}
			if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || !st.MIGPending {
				t.Fatalf("after the retry pass: MIG current %t pending %t, want the enable still pending", st.MIGCurrent, st.MIGPending)
			}
			g.r.Reread, g.locks.onBegin = nil, nil
			g.r.Sleep = func(context.Context, time.Duration) error { return nil }
			g.prep.names.Delete("gpu-0")
			g.alloc.live = nil
			g.wantPendingModeCancelled(t)
		})
	}
}

// TestOthersPendingMIGModeLeftAlone: the agent cancels only the MIG mode
// change it made. On an A100 the driver cannot reset (passed through to a
// virtual machine), the agent's enable waits for a reboot; after it, MIG is
// on, and the operator disables MIG, which waits for the next reboot: a
// disable the agent did not ask for. With the spec gone the agent leaves
// that change alone.
func TestOthersPendingMIGModeLeftAlone(t *testing.T) {
	g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", NoGPUReset: true})
	ctx := context.Background()
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonResetRequired {
		t.Fatalf("enable without a GPU reset: %+v, want ResetRequired", got)
	}
	if err := g.sim.ResetGPU(0); err != nil { // the reboot
		t.Fatal(err)
	}
	if _, err := g.mgr.SetMIGMode(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || st.MIGPending {
		t.Fatalf("after the operator's disable: MIG current %t pending %t, want a disable pending", st.MIGCurrent, st.MIGPending)
	}
	for range 2 {
		if _, err := g.r.Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || st.MIGPending {
		t.Errorf("MIG current %t pending %t, want the operator's disable left pending", st.MIGCurrent, st.MIGPending)
	}
}

// leaveEnablePending runs a pass that enables MIG on GPU 0 for a 7g.80gb
// while a process (outside any claim) holds the GPU from the drain's
// re-check on, so that the enable stays pending (Blocked/ResetRequired);
// the process is gone when it returns. It returns the specs of the pass.
func (g *rig) leaveEnablePending(t *testing.T) []v1alpha1.GPUSpec {
	t.Helper()
	uuid := g.sim.Snapshot().GPUs[0].UUID
	var pid uint32
	g.locks.onBegin = func() {
		g.locks.onBegin = nil
		var err error
		if pid, err = g.sim.StartProcess(uuid, 1000); err != nil {
			t.Fatal(err)
		}
	}
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	res, err := g.r.Sync(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired {
		t.Fatalf("enable under a process: %+v, want Blocked/ResetRequired", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || !st.MIGPending {
		t.Fatalf("MIG current %t pending %t, want an enable pending", st.MIGCurrent, st.MIGPending)
	}
	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	return specs
}

// wantPendingModeCancelled runs two passes with no spec and checks that
// GPU 0's pending MIG mode change is cancelled and the whole GPU published
// untainted.
func (g *rig) wantPendingModeCancelled(t *testing.T) {
	t.Helper()
	pub := &capturePublisher{}
	g.r.Inventory = &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub}
	for range 2 {
		if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	tainted := sets.New[string]()
	for k := range wantedKeys(resourceslice.DriverResources(pub.last)) {
		if k.drained {
			tainted.Insert(k.name)
		}
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGPending != st.MIGCurrent || tainted.Len() > 0 {
		t.Errorf("with no spec: MIG current %t pending %t, tainted %v; want the agent's pending enable cancelled and gpu-0 published untainted",
			st.MIGCurrent, st.MIGPending, sets.List(tainted))
	}
}

// TestPendingMIGModeCancelledUnderClaims: an enable the spec asks for is
// pending when a claim gets the whole GPU (one that tolerates the drain
// taint) or the plugin prepares it. Left armed, the next reset (a reboot)
// would turn MIG on and take the device from the claim, whose pod could
// then never start again. The agent cancels the change and waits for the
// claim as for any device in use; once the claim is gone it enables MIG
// and applies the layout.
func TestPendingMIGModeCancelledUnderClaims(t *testing.T) {
	tests := map[string]func(g *rig, held bool){
		"allocated": func(g *rig, held bool) {
			g.alloc.cached = nil
			if held {
				g.alloc.cached = sets.New("gpu-0")
			}
		},
		"prepared": func(g *rig, held bool) {
			if held {
				g.prep.names.Insert("gpu-0")
			} else {
				g.prep.names.Delete("gpu-0")
			}
		},
	}
	for name, hold := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			ctx := context.Background()
			specs := g.leaveEnablePending(t)
			hold(g, true)
			res, err := g.r.Sync(ctx, specs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, "pending MIG mode change was cancelled") {
				t.Errorf("claim on gpu-0 with an enable pending: %+v, want Blocked/DeviceInUse saying the change was cancelled", got)
			}
			if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
				t.Fatalf("MIG current %t pending %t, want the enable cancelled while the claim holds gpu-0", st.MIGCurrent, st.MIGPending)
			}
			// A reset now keeps gpu-0.
			if err := g.sim.ResetGPU(0); err != nil {
				t.Fatal(err)
			}
			if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent {
				t.Fatal("MIG on after a reset, want gpu-0 kept for its claim")
			}
			hold(g, false)
			if res, err = g.r.Sync(ctx, specs, nil); err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
				t.Errorf("claim gone: %+v, want Ready", got)
			}
			if got := g.layouts(t); got[0] != "7g.80gb@0" {
				t.Errorf("layout %q, want 7g.80gb@0", got[0])
			}
		})
	}
}

// TestPendingMIGModeCancelFailureKeepsRecord: the cancel of a pending
// enable under a claim fails (NVML error); the journal still records the
// enable as the agent's, so once the claim and the spec are gone the
// enable is cancelled, not left armed for nobody.
func TestPendingMIGModeCancelFailureKeepsRecord(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := context.Background()
	specs := g.leaveEnablePending(t)
	g.alloc.cached = sets.New("gpu-0")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "SetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(ctx, specs, nil); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || !st.MIGPending {
		t.Fatalf("MIG current %t pending %t after the failed cancel, want the enable still pending", st.MIGCurrent, st.MIGPending)
	}
	g.alloc.cached = nil
	g.wantPendingModeCancelled(t)
}

// gatedAllocations are allocations of which the binding gate will refuse
// all (GuardedDevices has none of them).
type gatedAllocations struct{ *fakeAllocations }

func (gatedAllocations) GuardedDevices(context.Context) (sets.Set[string], error) {
	return sets.New[string](), nil
}

// TestPendingMIGModeKeptUnderRefusedAllocation: with binding conditions,
// an allocation of gpu-0 while its MIG enable is pending is one the
// binding gate refuses (the device is draining): no pod will run on it,
// so the enable is not cancelled for it; the GPU waits (ResetRequired)
// until the scheduler drops the allocation.
func TestPendingMIGModeKeptUnderRefusedAllocation(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	specs := g.leaveEnablePending(t)
	g.alloc.cached = sets.New("gpu-0")
	g.r.Allocations = gatedAllocations{g.alloc}
	res, err := g.r.Sync(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonResetRequired {
		t.Errorf("result %+v, want ResetRequired", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || !st.MIGPending {
		t.Errorf("MIG current %t pending %t, want the enable kept pending", st.MIGCurrent, st.MIGPending)
	}
}
