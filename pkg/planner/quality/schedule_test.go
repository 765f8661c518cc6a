package quality

import (
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestScheduleTakesFreeDevicesFirst: before miglayout's plan, kube-scheduler
// gives each pending claim (arrival order) that a ready free device of its
// profile satisfies the first such device in publication order (least
// room lost first) on a node it picks among those with one; a claim no free device satisfies, or only
// a device still being created, stays pending for the planner.
func TestScheduleTakesFreeDevicesFirst(t *testing.T) {
	m := a100(t)
	s := &sim{model: m, perNode: 1, now: 100}
	for i, layout := range []string{"1g.10gb@6,1g.10gb@2,1g.10gb@4,2g.20gb@0", "1g.10gb@1,1g.10gb@3,1g.10gb@5"} {
		g := &simGPU{idx: i, node: i, owner: map[mig.Device]int{}, ready: map[mig.Device]float64{}, layout: mig.MustParseLayout(layout).Canonical()}
		for _, d := range g.layout {
			g.ready[d] = 0
		}
		s.gpus = append(s.gpus, g)
	}
	// Node 0's 2g.20gb is still being created.
	s.gpus[0].ready[mig.Device{Profile: "2g.20gb", Start: 0}] = 110
	profiles := []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"}
	for id, p := range profiles {
		s.claims = append(s.claims, &simClaim{claim: &claim{id: id, profile: p, hold: 60}, gpu: -1})
		s.pending = append(s.pending, id)
	}
	if err := (&miglayoutStrategy{}).schedule(s); err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, c := range s.claims {
		if c.st != cPending {
			got[c.id] = c.dev.String() + " on node " + strconv.Itoa(s.gpus[c.gpu].node)
		}
	}
	// Each node's 1g.10gb devices go least room lost first (slice 6 takes
	// no 2g.20gb placement; those in the 4g.40gb placement last, then by
	// placement); both nodes serve.
	want := map[int]string{}
	next := map[int][]string{0: {"1g.10gb@6", "1g.10gb@4", "1g.10gb@2"}, 1: {"1g.10gb@5", "1g.10gb@1", "1g.10gb@3"}}
	nodes := map[int]bool{}
	for id := range 4 {
		if c := s.claims[id]; c.st != cPending {
			n := s.gpus[c.gpu].node
			want[id] = next[n][0] + " on node " + strconv.Itoa(n)
			next[n] = next[n][1:]
			nodes[n] = true
		}
	}
	if len(want) != 4 || len(nodes) != 2 {
		t.Errorf("1g.10gb claims placed on nodes %v (%d of 4); want all four, on both nodes", nodes, len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	if !slices.Equal(s.pending, []int{4, 5}) {
		t.Errorf("pending %v, want the 2g.20gb (its device is not ready) and the 3g.40gb (none free)", s.pending)
	}
}
