package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlansNoPlacementOnlyNVMLOffers: where NVML offers 2g.20gb at a
// fourth placement (start 6) the catalog lacks, and 1g.20gb not at its
// start 6, the Auto planner, on the controller's variant of the model,
// plans neither there: the agent validates and creates with the catalog's
// placements, and NVML refuses the 1g.20gb.
func TestPlansNoPlacementOnlyNVMLOffers(t *testing.T) {
	a100, _ := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	// NVML offers 2g.20gb at a fourth start, 6, and 1g.20gb at three of
	// the catalog's four (a variant of the model, not the model).
	variant, err := a100.WithNVMLPlacements(map[string][]mig.Placement{
		"2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}, {Start: 6, Size: 2}},
		"1g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if variant == a100 {
		t.Fatal("no variant")
	}
	n := node("n1").gpu("A100-SXM4-80GB", "3g.40gb@0,2g.20gb@4", "3g.40gb@0,2g.20gb@4").build()
	n.GPUs[0].Info = migslices.PlannedGPU(variant, 0)
	snap := Snapshot{Driver: driver, Nodes: []Node{n}, Pending: []Pod{pod("p", 1).claim(profileIs("2g.20gb"), 1).build(), pod("q", 1).claim(profileIs("1g.20gb"), 1).build()},
		Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	got, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Changes) != 0 || got.Unservable["default/p"] != NoRoom || got.Unservable["default/q"] != NoRoom {
		t.Errorf("changes %+v, unservable %v; want both pods waiting for room (only 6-7 is free)", got.Changes, got.Unservable)
	}
	for _, c := range got.Changes {
		// The agent's check (repartitioner.planGPU: the catalog model).
		if err := a100.ValidateKeeping(c.To, nil); err != nil {
			t.Errorf("Auto plans %s, which the agent refuses: %v", c.To, err)
		}
	}
}
