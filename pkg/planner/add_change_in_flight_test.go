package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestAddServesAPodOfAChangeInFlightOnce: a pod added to a plan, whose
// device a change in flight brings (GPU.Serves), is served by that device
// once, as the whole plan of it would: it is not planned a second time.
func TestAddServesAPodOfAChangeInFlightOnce(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p").build()}
	p := pod("p", 1).claim(profileIs("1g.10gb"), 1).build()
	snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	want := trace{Served: []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6"}}
	checkTrace(t, want, toTrace(pl.Result()))
	checkTrace(t, planTrace(t, nodes, []Pod{p}), toTrace(pl.Result()))
}
