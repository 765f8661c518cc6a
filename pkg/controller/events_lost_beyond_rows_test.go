package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestTransitionsLostBeyondTheRowsBackChanged: a node without a status row
// (more nodes than the status holds rows for) whose agent was lost and comes
// back with its layout changed meanwhile gets AgentReturned and
// Repartitioned, as a node with a row does: the layouts it last reported
// while lost are remembered.
func TestTransitionsLostBeyondTheRowsBackChanged(t *testing.T) {
	lost := lostNode("a")
	lost.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseRepartitioning}}
	back := readyNode("a")
	back.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}
	var prev v1alpha1.MigLayoutStatus // no row of node a
	_, seen := Transitions(&prev, Observation{Nodes: []NodeState{lost}}, sets.New[string]())
	got, _ := Transitions(&prev, Observation{Nodes: []NodeState{back}}, seen)
	want := []Event{{"Normal", "AgentReturned", "Heartbeat", "node a: the agent renews its heartbeat Lease again", "a"},
		{"Normal", "Repartitioned", "Repartition", `node a holds the desired layout; changed: gpu 0 "7g.80gb@0"`, "a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
