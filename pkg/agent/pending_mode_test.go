package agent

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/miglayout/miglayout/api/v1alpha1"
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
	ctx := context.Background()
	uuid := g.sim.Snapshot().GPUs[0].UUID
	started := false
	g.locks.onBegin = func() {
		if !started {
			started = true
			if _, err := g.sim.StartProcess(uuid, 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired {
		t.Fatalf("enable under a process: %+v, want Blocked/ResetRequired", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || !st.MIGPending {
		t.Fatalf("MIG current %t pending %t, want an enable pending", st.MIGCurrent, st.MIGPending)
	}
	// The NodeMigLayout is deleted: the agent's passes ask for nothing.
	pub := &capturePublisher{}
	g.r.Inventory = &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub}
	for range 2 {
		if _, err := g.r.Sync(ctx, nil, nil); err != nil {
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
