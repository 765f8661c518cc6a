package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestKilledAfterEnableWorkGone: the agent is killed right after it turned
// MIG mode on for work that then made nothing (a layout's first create, or
// the restore of a device a claim held after a reboot), and by the restart
// the work is gone: the spec no longer lists the GPU, or the claim was
// released. The restarted agent turns MIG mode off again, as its in-process
// undo would have, so that the GPU is published whole, not left in MIG mode
// without devices, published as nothing, for good. A claim still holding
// the device keeps MIG mode on: the device is made again without turning the
// mode off and on.
func TestKilledAfterEnableWorkGone(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	type want struct {
		published  []string
		migOn      bool
		restartOps []string
		// emptied is what each pass after the restart did to emptied
		// GPUs (takeEmptied).
		emptied []map[int]bool
	}
	off := []map[int]bool{{0: true}, nil, nil}
	cases := map[string]struct {
		restore   bool // a reboot lost the held device; else a layout's enable
		at        int
		after     bool
		stillHeld bool
		want      want
	}{
		"layout, killed after the enable, spec gone": {at: 1, after: true,
			want: want{published: []string{"gpu-0"}, restartOps: []string{"mode false"}, emptied: off}},
		"layout, killed before the first create, spec gone": {at: 2,
			want: want{published: []string{"gpu-0"}, restartOps: []string{"mode false"}, emptied: off}},
		"restore, killed after the enable, claim released": {restore: true, at: 1, after: true,
			want: want{published: []string{"gpu-0"}, restartOps: []string{"mode false"}, emptied: off}},
		"restore, killed before the create, claim released": {restore: true, at: 2,
			want: want{published: []string{"gpu-0"}, restartOps: []string{"mode false"}, emptied: off}},
		"restore, killed after the enable, claim held": {restore: true, at: 1, after: true, stillHeld: true,
			want: want{published: []string{held}, migOn: true, restartOps: []string{"create 3g.40gb@4"}, emptied: []map[int]bool{nil, nil, nil}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xH100-SXM5-80GB")
			var specs []v1alpha1.GPUSpec
			if c.restore {
				g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
				g.alloc.cached = sets.New(held)
				g.prep.names.Insert(held)
				g.reboot(t, 0)
			} else {
				specs = []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
			}
			cm := &killingManager{Manager: g.mgr, at: c.at, after: c.after}
			g.r.GPUs = cm
			if died, err := syncUntilKilled(g.r, specs); !died {
				t.Fatalf("not killed: %v (ops %v)", err, cm.ops)
			}
			if !c.stillHeld {
				g.alloc.cached = sets.New[string]()
				g.prep.names.Delete(held)
			}
			after, emptied := g.restartWithoutSpecs(t, 3)
			st := g.sim.Snapshot().GPUs[0]
			got := want{published: g.inv.last().devices, migOn: st.MIGCurrent || st.MIGPending, restartOps: after.ops, emptied: emptied}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("after the restart (-want +got):\n%s", diff)
			}
			if e := g.r.Journal.Entries(); len(e) != 0 {
				t.Errorf("journal left: %+v", e)
			}
		})
	}
}

// restartWithoutSpecs restarts the agent (rig.restart) with a manager that
// records its mutating NVML calls, runs passes passes with no spec, and
// returns the recorder and what each pass did to emptied GPUs
// (Repartitioner.takeEmptied).
func (g *rig) restartWithoutSpecs(t *testing.T, passes int) (*killingManager, []map[int]bool) {
	t.Helper()
	g.restart(t)
	after := &killingManager{Manager: g.mgr}
	g.r.GPUs = after
	var emptied []map[int]bool
	for range passes {
		if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
			t.Fatal(err)
		}
		emptied = append(emptied, g.r.takeEmptied())
	}
	return after, emptied
}
