package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestTransitions(t *testing.T) {
	pendingRow := v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhasePending,
		GPUs: []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhasePending}}}
	notReportedRow := v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhasePending, Message: msgNoReport}
	blockedRow := v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhaseBlocked,
		GPUs: []v1alpha1.GPURow{{Index: 0, Phase: v1alpha1.PhaseBlocked}}}
	failedRow := v1alpha1.NodeRow{Node: "b", Phase: v1alpha1.PhaseFailed,
		GPUs: []v1alpha1.GPURow{{Index: 1, Phase: v1alpha1.PhaseFailed}}}
	ready := readyNode("a")
	ready.Row.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}
	conflict := Selection{Nodes: []string{"a"}, Conflicts: map[string][]string{"other": {"a"}}}
	conflictMsg := `MigLayout "other" also selects node a; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)`
	tests := map[string]struct {
		prev v1alpha1.MigLayoutStatus
		obs  Observation
		want []Event
	}{
		"node turns ready": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{pendingRow}},
			obs:  Observation{Nodes: []NodeState{ready}},
			want: []Event{{"Normal", "Repartitioned", "Repartition", `node a holds the desired layout; changed: gpu 0 "7g.80gb@0"`, "a"}},
		},
		"node turns ready: only the GPUs that changed are named": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "a", Phase: v1alpha1.PhasePending, GPUs: []v1alpha1.GPURow{
				pendingRow.GPUs[0], {Index: 1, Desired: "1g.10gb@6", Actual: "1g.10gb@6", Phase: v1alpha1.PhaseReady}}}}},
			obs: Observation{Nodes: []NodeState{func() NodeState {
				st := readyNode("a")
				st.Row.GPUs = []v1alpha1.GPURow{ready.Row.GPUs[0], {Index: 1, Desired: "1g.10gb@6", Actual: "1g.10gb@6", Phase: v1alpha1.PhaseReady}}
				return st
			}()}},
			want: []Event{{"Normal", "Repartitioned", "Repartition", `node a holds the desired layout; changed: gpu 0 "7g.80gb@0"`, "a"}},
		},
		"node seen for the first time ready: nothing was repartitioned": {
			obs: Observation{Nodes: []NodeState{ready}},
		},
		"node ready at its agent's first report: nothing was repartitioned": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{notReportedRow}},
			obs:  Observation{Nodes: []NodeState{ready}},
		},
		"node ready once its conflict ends: nothing was repartitioned": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{ConflictNode("a", conflictMsg).Row}},
			obs:  Observation{Nodes: []NodeState{ready}},
		},
		"node stays ready": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{ready.Row}},
			obs:  Observation{Nodes: []NodeState{ready}},
		},
		"a spec problem appears": {
			obs:  Observation{Nodes: []NodeState{ready}, SpecProblems: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: `rule "t4" matches no GPU`}}},
			want: []Event{{"Warning", "RuleMatchesNoGPU", "CheckSpec", `rule "t4" matches no GPU`, ""}},
		},
		"a spec problem Degraded already names": {
			prev: v1alpha1.MigLayoutStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: `1 spec problem: rule "t4" matches no GPU`}}},
			obs: Observation{Nodes: []NodeState{ready}, SpecProblems: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: `rule "t4" matches no GPU`}}},
		},
		"GPU goes blocked": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{pendingRow}},
			obs:  Observation{Nodes: []NodeState{blockedNode("a")}},
			want: []Event{{"Warning", "Blocked", "RepartitionGPU0", "node a gpu 0 is blocked (DeviceInUse): claim ns/c", "a"}},
		},
		"GPU stays blocked": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{blockedRow}},
			obs:  Observation{Nodes: []NodeState{blockedNode("a")}},
		},
		"rule fails on a GPU": {
			obs: Observation{Nodes: []NodeState{invalidNode("b")}},
			want: []Event{{"Warning", "InvalidLayout", "ComputeLayoutGPU1",
				`node b gpu 1 (A100), rule "x": does not fit; the GPU keeps the layout it holds (a change begun is carried out, one not begun dropped)`, "b"}},
		},
		"rule still fails": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{failedRow}},
			obs:  Observation{Nodes: []NodeState{invalidNode("b")}},
		},
		"an agent is lost": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{readyNode("a").Row}},
			obs:  Observation{Nodes: []NodeState{lostNode("a")}},
			want: []Event{{"Warning", "AgentLost", "Heartbeat", "node a: no heartbeat", "a"}},
		},
		"an agent stays lost": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{lostNode("a").Row}},
			obs:  Observation{Nodes: []NodeState{lostNode("a")}},
		},
		"a lost agent is back: it is told instead of Repartitioned": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{lostNode("a").Row}},
			obs:  Observation{Nodes: []NodeState{ready}},
			want: []Event{{"Normal", "AgentReturned", "Heartbeat", "node a: the agent renews its heartbeat Lease again", "a"}},
		},
		"a lost agent is back with its layout changed meanwhile: both are told": {
			prev: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{func() v1alpha1.NodeRow {
				r := lostNode("a").Row
				r.GPUs = []v1alpha1.GPURow{{Index: 0, Desired: "7g.80gb@0", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseRepartitioning}}
				return r
			}()}},
			obs: Observation{Nodes: []NodeState{ready}},
			want: []Event{{"Normal", "AgentReturned", "Heartbeat", "node a: the agent renews its heartbeat Lease again", "a"},
				{"Normal", "Repartitioned", "Repartition", `node a holds the desired layout; changed: gpu 0 "7g.80gb@0"`, "a"}},
		},
		"conflict appears": {
			obs:  Observation{Selection: conflict, Nodes: []NodeState{ConflictNode("a", "x")}},
			want: []Event{{"Warning", "Conflict", "SelectNodes", conflictMsg, ""}},
		},
		"conflict goes on": {
			prev: v1alpha1.MigLayoutStatus{Conditions: []metav1.Condition{{
				Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Message: conflictMsg,
			}}},
			obs: Observation{Selection: conflict, Nodes: []NodeState{ConflictNode("a", "x")}},
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

// TestTransitionsRemembered: with the problems seen at the previous write,
// a problem fires once when it appears, and again only after it went away,
// whatever the previous status shows of it (rows are capped at 64 nodes,
// the Degraded message names a few problems).
func TestTransitionsRemembered(t *testing.T) {
	spec := SpecProblem{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: `rule "t4" matches no GPU`}
	problems := Observation{Nodes: []NodeState{blockedNode("a"), invalidNode("b"), lostNode("c")}, SpecProblems: []SpecProblem{spec}}
	none := Observation{Nodes: []NodeState{readyNode("a"), readyNode("b"), readyNode("c")}}
	// The previous status shows none of them (beyond the rows, not named).
	var prev v1alpha1.MigLayoutStatus
	reasons := func(evts []Event) []string {
		var out []string
		for _, e := range evts {
			out = append(out, e.Reason)
		}
		return out
	}
	var seen sets.Set[string]
	steps := []struct {
		obs  Observation
		want []string
	}{
		{problems, []string{"Blocked", "InvalidLayout", "AgentLost", "RuleMatchesNoGPU"}},
		{problems, nil},
		{problems, nil},
		{none, []string{"AgentReturned"}},
		{none, nil},
		{problems, []string{"Blocked", "InvalidLayout", "AgentLost", "RuleMatchesNoGPU"}},
	}
	for i, st := range steps {
		var got []Event
		if seen == nil {
			seen = sets.New[string]() // remembered from the start
		}
		got, seen = Transitions(&prev, st.obs, seen)
		if diff := cmp.Diff(st.want, reasons(got)); diff != "" {
			t.Errorf("write %d: events (-want +got):\n%s", i, diff)
		}
	}
}

// TestTransitionsSameProblemOtherNodes: a spec problem whose message
// changes as nodes join (it counts the nodes judged) and a conflict whose
// shared nodes grow are each told once; a conflict with one more MigLayout
// is told again, and so is a spec problem still there after an edit.
func TestTransitionsSameProblemOtherNodes(t *testing.T) {
	judged := func(n int) SpecProblem {
		return SpecProblem{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: `rule "t4"`,
			Message: fmt.Sprintf(`rule "t4" matches no GPU (%d selected nodes; GPUs: %d× A100-SXM4-80GB)`, n, n)}
	}
	conflict := func(others map[string][]string) Selection { return Selection{Conflicts: others} }
	reasons := func(evts []Event) []string {
		var out []string
		for _, e := range evts {
			out = append(out, e.Reason)
		}
		return out
	}
	steps := []struct {
		obs  Observation
		want []string
	}{
		{Observation{SpecProblems: []SpecProblem{judged(4)}, Selection: conflict(map[string][]string{"b": {"n1"}})}, []string{"RuleMatchesNoGPU", "Conflict"}},
		{Observation{SpecProblems: []SpecProblem{judged(5)}, Selection: conflict(map[string][]string{"b": {"n1", "n2"}})}, nil},
		{Observation{SpecProblems: []SpecProblem{judged(6)}, Selection: conflict(map[string][]string{"b": {"n1", "n2", "n3"}})}, nil},
		{Observation{SpecProblems: []SpecProblem{judged(6)}, Selection: conflict(map[string][]string{"b": {"n1"}, "c": {"n3"}})}, []string{"Conflict"}},
		// The spec edited, the problem still there (or another of the
		// same rule): told again.
		{Observation{Generation: 2, SpecProblems: []SpecProblem{judged(6)}, Selection: conflict(map[string][]string{"b": {"n1"}, "c": {"n3"}})}, []string{"RuleMatchesNoGPU"}},
	}
	// Both with the previous write's problems remembered and without (a
	// controller restarted between writes: the previous status decides,
	// which names a spec problem by its message, so that case is left out).
	for _, remembered := range []bool{true, false} {
		var prev v1alpha1.MigLayoutStatus
		var seen sets.Set[string]
		for i, st := range steps {
			want := st.want
			if remembered && seen == nil {
				seen = sets.New[string]()
			}
			if !remembered {
				seen = nil
				st.obs.SpecProblems = nil
				want = slices.DeleteFunc(slices.Clone(want), func(r string) bool { return r != EventConflict })
				if len(want) == 0 {
					want = nil
				}
			}
			var got []Event
			got, seen = Transitions(&prev, st.obs, seen)
			if diff := cmp.Diff(want, reasons(got)); diff != "" {
				t.Errorf("remembered %t, write %d: events (-want +got):\n%s", remembered, i, diff)
			}
			ApplyStatus(&prev, st.obs)
		}
	}
}
