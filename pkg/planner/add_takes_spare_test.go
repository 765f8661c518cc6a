package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestAddedPodTakingASpareWaitsForItsChange: a pod added to a plan that is
// given a spare the plan makes (a free device that does not exist yet)
// needs that change, and the change serves it.
func TestAddedPodTakingASpareWaitsForItsChange(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).gpu("A100-SXM4-80GB", "", "").build()}
	snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(context.Background(), pod("p", 1).claim(profileIs("1g.10gb"), 1).build()); err != nil {
		t.Fatal(err)
	}
	want := trace{
		Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/p keeps spare 1g.10gb"},
		Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, toTrace(pl.Result()))
}
