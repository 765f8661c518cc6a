package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestTransitionsEdges: events that must not fire (or fire once) on
// states next to the ones TestTransitions covers: a conflict node, a lost
// agent back but not yet done, a node Ready before and after, a refused
// write already in the status, a GPU that failed rather than blocked.
func TestTransitionsEdges(t *testing.T) {
	lostRow := func(actual string) v1alpha1.NodeRow {
		r := lostNode("a").Row
		r.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: actual, Phase: v1alpha1.PhaseRepartitioning}}
		return r
	}
	readyWith := func(actual string) NodeState {
		st := readyNode("a")
		st.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: actual, Actual: actual, Phase: v1alpha1.PhaseReady}}
		return st
	}
	refused := withWriteError(readyNode("a"), errors.New("denied by policy"))
	tests := map[string]struct {
		prev v1alpha1.MigLayoutStatus
		obs  Observation
		want []Event
	}{
		"a lost node another MigLayout now selects too: nothing is told": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{lostNode("a").Row}},
			obs:  Observation{Nodes: []NodeState{ConflictNode("a", "x")}},
		},
		"a lost agent back, its node still changing: only the return is told": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{lostRow("3g.40gb@0,3g.40gb@4")}},
			obs: Observation{Nodes: []NodeState{func() NodeState {
				st := progressingNode("a")
				st.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "1g.10gb@0", Phase: v1alpha1.PhaseRepartitioning}}
				return st
			}()}},
			want: []Event{{"Normal", "AgentReturned", "Heartbeat", "node a: the agent renews its heartbeat Lease again", "a"}},
		},
		"a node Ready before and now, with other layouts: it did not turn Ready": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{readyWith("3g.40gb@0,3g.40gb@4").Row}},
			obs:  Observation{Nodes: []NodeState{readyWith("7g.80gb@0")}},
		},
		"a refused write the status already tells: not told again": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{refused.Row}},
			obs:  Observation{Nodes: []NodeState{refused}},
		},
		"a GPU the agent reports Failed: no Blocked event": {
			obs: Observation{Nodes: []NodeState{{Row: v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
				Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "nvml: unknown error"}}}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, _ := Transitions(&tc.prev, tc.obs, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransitionsProblemOtherMessage: a rule failing on a GPU is told
// again when what fails changes (another message on the same GPU), and
// not while the same failure stays.
func TestTransitionsProblemOtherMessage(t *testing.T) {
	failing := func(msg string) Observation {
		st := invalidNode("b")
		st.Problems[0].Message = msg
		return Observation{Nodes: []NodeState{st}}
	}
	var prev v1alpha1.MigLayoutStatus
	seen := sets.New[string]()
	steps := []struct {
		obs  Observation
		want int
	}{
		{failing(`gpu 1 (A100), rule "x": does not fit`), 1},
		{failing(`gpu 1 (A100), rule "x": does not fit`), 0},
		{failing(`gpu 1 (A100), rule "y": does not fit`), 1},
	}
	for i, st := range steps {
		var got []Event
		got, seen = Transitions(&prev, st.obs, seen)
		if len(got) != st.want {
			t.Errorf("write %d: events %+v, want %d", i, got, st.want)
		}
	}
}

// TestTransitionsSpecProblemsFirstFewTold: of many spec problems appearing
// at once, only the first maxSpecProblemEvents get an event.
func TestTransitionsSpecProblemsFirstFewTold(t *testing.T) {
	var obs Observation
	for i := range maxSpecProblemEvents + 2 {
		obs.SpecProblems = append(obs.SpecProblems, SpecProblem{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
			Subject: fmt.Sprintf("rule %q", fmt.Sprint("r", i)), Message: fmt.Sprintf("rule %q matches no GPU", fmt.Sprint("r", i))})
	}
	got, _ := Transitions(&v1alpha1.MigLayoutStatus{}, obs, sets.New[string]())
	var notes []string
	for _, e := range got {
		notes = append(notes, e.Note)
	}
	want := []string{`rule "r0" matches no GPU`, `rule "r1" matches no GPU`, `rule "r2" matches no GPU`, `rule "r3" matches no GPU`}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("events told (-want +got):\n%s", diff)
	}
}

// TestTransitionsRetoldWhenSubjectOrHolderChanges: with the previous
// write's problems remembered, a spec problem about another part of the
// spec (same reason) is told, and a conflict is told again when the other
// MigLayout's node selector turns invalid (it holds the nodes rather than
// selects them).
func TestTransitionsRetoldWhenSubjectOrHolderChanges(t *testing.T) {
	noGPU := func(rule string) SpecProblem {
		return SpecProblem{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: fmt.Sprintf("rule %q", rule),
			Message: fmt.Sprintf("rule %q matches no GPU", rule)}
	}
	conflicts := map[string][]string{"b": {"n1"}}
	steps := []struct {
		obs  Observation
		want []string
	}{
		{Observation{SpecProblems: []SpecProblem{noGPU("t4")}, Selection: Selection{Conflicts: conflicts}}, []string{"RuleMatchesNoGPU", "Conflict"}},
		{Observation{SpecProblems: []SpecProblem{noGPU("l4")}, Selection: Selection{Conflicts: conflicts}}, []string{"RuleMatchesNoGPU"}},
		{Observation{SpecProblems: []SpecProblem{noGPU("l4")}, Selection: Selection{Conflicts: conflicts, InvalidHolders: map[string]bool{"b": true}}}, []string{"Conflict"}},
	}
	var prev v1alpha1.MigLayoutStatus
	seen := sets.New[string]()
	for i, st := range steps {
		var got []Event
		got, seen = Transitions(&prev, st.obs, seen)
		var reasons []string
		for _, e := range got {
			reasons = append(reasons, e.Reason)
		}
		if diff := cmp.Diff(st.want, reasons); diff != "" {
			t.Errorf("write %d: events (-want +got):\n%s", i, diff)
		}
		ApplyStatus(&prev, st.obs)
	}
}

// TestTransitionsBeyondTheRowsBackAsItWas: a node with no row in the
// status that was not Ready and turns Ready holding the layouts it held
// (its change was held back, then its rule reverted) is not told as
// Repartitioned.
func TestTransitionsBeyondTheRowsBackAsItWas(t *testing.T) {
	held := progressingNode("a")
	held.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhasePending}}
	asItWas := readyNode("a")
	asItWas.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "3g.40gb@0,3g.40gb@4", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}}
	// The status has no row of the node (rows are capped).
	var prev v1alpha1.MigLayoutStatus
	_, seen := Transitions(&prev, Observation{Nodes: []NodeState{held}}, sets.New[string]())
	if got, _ := Transitions(&prev, Observation{Nodes: []NodeState{asItWas}}, seen); len(got) != 0 {
		t.Errorf("events %+v, want none", got)
	}
}

// TestTransitionsNotesWithinTheAPILimit: an event's note stays within the
// 1024 bytes events.k8s.io/v1 takes, however long the message it tells
// (an agent's error, a spec problem), cut with an ellipsis.
func TestTransitionsNotesWithinTheAPILimit(t *testing.T) {
	long := strings.Repeat("x", 3000)
	lost := lostNode("a")
	lost.LostMessage = long
	got, _ := Transitions(&v1alpha1.MigLayoutStatus{}, Observation{Nodes: []NodeState{lost},
		SpecProblems: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: `rule "t4"`, Message: long}}}, nil)
	if len(got) != 2 {
		t.Fatalf("events %d, want 2 (AgentLost, RuleMatchesNoGPU)", len(got))
	}
	for _, e := range got {
		if len(e.Note) != 1024 || !strings.HasSuffix(e.Note, "...") {
			t.Errorf("%s note of %d bytes ending %q, want 1024 ending with ...", e.Reason, len(e.Note), e.Note[len(e.Note)-5:])
		}
	}
}
