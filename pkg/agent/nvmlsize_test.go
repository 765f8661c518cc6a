package agent

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestRefusesNVMLPlacementOfOtherSizeBeforeDestroying: the driver offers
// 1g.20gb at the catalog's starts (0,2,4,6) but one memory slice wide, where
// the catalog says two. The agent reads that table (catalogMismatches) and
// refuses to create 1g.20gb@0 (NVML refuses the catalog's 0+2 placement)
// before it drains or destroys anything, and its status says NVML offers
// 1g.20gb nowhere miglayout can create it.
func TestRefusesNVMLPlacementOfOtherSizeBeforeDestroying(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := a100.Profile("1g.20gb")
	narrow := *p
	narrow.MemorySlices = 1
	narrow.Placements = []mig.Placement{{Start: 0, Size: 1}, {Start: 2, Size: 1}, {Start: 4, Size: 1}, {Start: 6, Size: 1}}
	g := newA100RigWith(t, narrow)
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "1g.20gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.layouts(t); got[0] != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("layout = %q, want 3g.40gb@0,3g.40gb@4 untouched (NVML refuses 1g.20gb at 0+2)", got[0])
	}
	for _, pub := range g.inv.pubs {
		if len(pub.draining) > 0 {
			t.Errorf("drained %v for a layout NVML refuses", pub.draining)
		}
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Errorf("result = %+v, want Failed/InvalidLayout before anything is destroyed", r)
	} else if !strings.Contains(r.Message, "1g.20gb") {
		t.Errorf("message %q does not name the profile", r.Message)
	}
}
