package quality

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGreedyPrefersFewerDestroyedOnEqualHeadroom: both forms of the
// "keep the largest free range" rule, between placements that leave the
// same room for large profiles, take the one that destroys fewer free
// devices.
func TestGreedyPrefersFewerDestroyedOnEqualHeadroom(t *testing.T) {
	for name, st := range map[string]strategy{"bestfit": bestFit{}, "largestrange": largestRange{}} {
		t.Run(name, func(t *testing.T) {
			// A running 3g.40gb at slice 4 leaves a 2g.20gb slices 0 or 2,
			// equal in headroom; free 1g.10gb devices fill slices 0 and 1.
			s := testSim(t, []string{"1g.10gb@0,1g.10gb@1,3g.40gb@4"}, "2g.20gb")
			s.strat = st
			s.own(t, 0, "3g.40gb@4")
			if err := st.decide(s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[int]string{0: "0/2g.20gb@2", 1: "0/3g.40gb@4"}, placed(s)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if s.destroyed != 0 {
				t.Errorf("destroyed %d devices, want none", s.destroyed)
			}
		})
	}
}

// TestGreedyFormsDiffer: a 1g.10gb beside a GPU running a 3g.40gb at slice
// 4 and an empty GPU. Cluster-wide (bestfit), it costs the empty GPU its 7g
// but the other GPU only its 4g, which comes second: it goes beside the
// 3g. Per GPU (largestrange), the empty GPU keeps a 4g after it, more than
// the other: it goes to the empty GPU.
func TestGreedyFormsDiffer(t *testing.T) {
	for name, tc := range map[string]struct {
		st   strategy
		want map[int]string
	}{
		"bestfit":      {bestFit{}, map[int]string{0: "0/1g.10gb@0", 1: "0/3g.40gb@4"}},
		"largestrange": {largestRange{}, map[int]string{0: "1/1g.10gb@6", 1: "0/3g.40gb@4"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSim(t, []string{"3g.40gb@4", ""}, "1g.10gb")
			s.strat = tc.st
			s.own(t, 0, "3g.40gb@4")
			if err := tc.st.decide(s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, placed(s)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNosGeometryChoice: strategy (b) keeps only geometries with at least
// as many devices of each profile as the GPU runs, applies one only if it
// provides some of the pending demand beyond the running devices, and
// creates its devices largest first, so a 4g.40gb takes slice 0 before a
// 3g.40gb is placed.
func TestNosGeometryChoice(t *testing.T) {
	for name, tc := range map[string]struct {
		layouts []string
		owned   map[int]string
		geoms   []map[string]int
		pending []string
		want    map[int]string
		changes int
	}{
		"a geometry with exactly the running count of a profile fits": {
			layouts: []string{"1g.10gb@0"}, owned: map[int]string{0: "1g.10gb@0"},
			geoms:   []map[string]int{{"1g.10gb": 1, "3g.40gb": 1}},
			pending: []string{"3g.40gb"},
			want:    map[int]string{0: "0/3g.40gb@4", 1: "0/1g.10gb@0"}, changes: 1,
		},
		"a geometry providing nothing beyond the running devices is not applied": {
			// The geometry's one 1g.10gb is the running one: none for the
			// pending 1g.10gb.
			layouts: []string{"1g.10gb@0"},
			owned:   map[int]string{0: "1g.10gb@0"},
			geoms:   []map[string]int{{"1g.10gb": 1, "3g.40gb": 1}},
			pending: []string{"1g.10gb"},
			want:    map[int]string{0: "", 1: "0/1g.10gb@0"},
		},
		"pending demand caps what a geometry provides": {
			// Two 1g.10gb provide no more than one for one claim: the first
			// geometry, which also makes a 3g.40gb, stays the choice.
			layouts: []string{""},
			geoms:   []map[string]int{{"1g.10gb": 1, "3g.40gb": 1}, {"1g.10gb": 2}},
			pending: []string{"1g.10gb"},
			want:    map[int]string{0: "0/1g.10gb@4"}, changes: 1,
		},
		"largest first": {
			layouts: []string{""},
			geoms:   []map[string]int{{"3g.40gb": 1, "4g.40gb": 1}},
			pending: []string{"4g.40gb"},
			want:    map[int]string{0: "0/4g.40gb@0"}, changes: 1,
		},
		"demand served on one GPU is not sought on the next": {
			// GPU 0 runs a 4g and a 2g: only the first geometry keeps them,
			// and it serves the 1g. For GPU 1, what is left is the 3g.
			layouts: []string{"4g.40gb@0,2g.20gb@4", ""},
			owned:   map[int]string{0: "4g.40gb@0"},
			geoms:   []map[string]int{{"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, {"1g.10gb": 7}, {"3g.40gb": 2}},
			pending: []string{"1g.10gb", "3g.40gb"},
			want:    map[int]string{0: "0/1g.10gb@6", 1: "1/3g.40gb@0", 2: "0/4g.40gb@0"}, changes: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSim(t, tc.layouts, tc.pending...)
			st := nos{geoms: tc.geoms}
			s.strat = st
			for gi, d := range tc.owned {
				s.own(t, gi, d)
			}
			if err := st.decide(s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, placed(s)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if s.changes != tc.changes {
				t.Errorf("%d changes, want %d", s.changes, tc.changes)
			}
		})
	}
}

// TestFirstFitDestroysOnlyDevicesInTheWay: making a 2g.20gb at slice 0,
// strategy (a) destroys the free 1g.10gb devices it overlaps and keeps the
// free 1g.10gb at slice 6.
func TestFirstFitDestroysOnlyDevicesInTheWay(t *testing.T) {
	s := testSim(t, []string{"1g.10gb@0,1g.10gb@1,1g.10gb@6"}, "2g.20gb")
	s.strat = firstFit{}
	if err := (firstFit{}).decide(s); err != nil {
		t.Fatal(err)
	}
	if got := s.gpus[0].layout.String(); got != "2g.20gb@0,1g.10gb@6" {
		t.Errorf("layout %s, want 2g.20gb@0,1g.10gb@6", got)
	}
	if s.destroyed != 2 {
		t.Errorf("destroyed %d devices, want 2", s.destroyed)
	}
}
