package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// fleetWithInvalidRule is nodes nodes of 8 GPUs each on which a rule is
// invalid for every GPU (InvalidLayout), as Transitions observes them.
func fleetWithInvalidRule(nodes int) Observation {
	var obs Observation
	for n := range nodes {
		st := NodeState{Row: v1alpha1.NodeRow{Node: fmt.Sprintf("n%03d", n), Phase: v1alpha1.PhaseFailed}, Failed: true}
		for g := range int32(8) {
			st.Problems = append(st.Problems, Problem{GPU: g, Reason: v1alpha1.ReasonInvalidLayout,
				Message: fmt.Sprintf(`gpu %d rule "bad": 3g.40gb:3 does not fit`, g)})
			st.Row.GPUs = append(st.Row.GPUs, v1alpha1.GPURow{Index: g, Phase: v1alpha1.PhaseFailed})
		}
		obs.Nodes = append(obs.Nodes, st)
	}
	return obs
}

// TestTransitionsManyGPUProblemsSummarized: a rule invalid on every GPU of
// a fleet is told in maxGPUProblemEvents events, one per GPU, and one more
// counting the rest, not in one event per GPU; told once.
func TestTransitionsManyGPUProblemsSummarized(t *testing.T) {
	obs := fleetWithInvalidRule(40)
	got, seen := Transitions(&v1alpha1.MigLayoutStatus{}, obs, sets.New[string]())
	if len(got) != maxGPUProblemEvents+1 {
		t.Fatalf("%d events, want %d", len(got), maxGPUProblemEvents+1)
	}
	for _, e := range got[:maxGPUProblemEvents] {
		if e.Reason != v1alpha1.ReasonInvalidLayout || e.Node == "" {
			t.Errorf("event %+v, want InvalidLayout about one node's GPU", e)
		}
	}
	want := Event{Type: "Warning", Reason: v1alpha1.ReasonInvalidLayout, Action: "ComputeLayoutManyGPUs",
		Note: "InvalidLayout on 304 more GPUs of 38 nodes (n002, n003, n004, and 35 more); the MigLayout's Degraded condition names the first; kubectl miglayout plan shows each GPU's"}
	if diff := cmp.Diff(want, got[maxGPUProblemEvents]); diff != "" {
		t.Errorf("the summary (-want +got):\n%s", diff)
	}
	if again, _ := Transitions(&v1alpha1.MigLayoutStatus{}, obs, seen); len(again) != 0 {
		t.Errorf("the same problems observed again: %d events, want none", len(again))
	}
}

// TestTransitionsRestartTellsNoNodeBeyondFullRows: a restarted controller
// (no memory of what it told) judges by the status it wrote before; a node
// with no row there, where the rows were full of nodes not Ready, may have
// been told already: it is not told again, while a node that joined a
// MigLayout whose rows list every node is.
func TestTransitionsRestartTellsNoNodeBeyondFullRows(t *testing.T) {
	obs := fleetWithInvalidRule(maxNodeRows + 10)
	var prev v1alpha1.MigLayoutStatus
	for _, n := range obs.Nodes[:maxNodeRows] {
		prev.Nodes = append(prev.Nodes, n.Row)
	}
	if got, _ := Transitions(&prev, obs, nil); len(got) != 0 {
		t.Errorf("after a restart, full rows: %d events, want none", len(got))
	}
	small := fleetWithInvalidRule(3)
	prev.Nodes = []v1alpha1.NodeRow{small.Nodes[0].Row, small.Nodes[1].Row}
	got, _ := Transitions(&prev, small, nil)
	var nodes []string
	for _, e := range got {
		nodes = append(nodes, e.Node)
	}
	if diff := cmp.Diff([]string{"n002", "n002", "n002", "n002", "n002", "n002", "n002", "n002"}, nodes); diff != "" {
		t.Errorf("after a restart, a node new since (-want +got):\n%s", diff)
	}
}
