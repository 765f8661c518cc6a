package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func readyNode(name string) NodeState {
	return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: v1alpha1.PhaseReady}, Ready: true, Reporting: true}
}

func silentNode(name string) NodeState {
	return EvaluateNode(name, nil, nil, AgentHealth{})
}

func progressingNode(name string) NodeState {
	return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: v1alpha1.PhaseDraining}, Progressing: true, Reporting: true}
}

// pausedNode is a node a pause keeps from its rules' layout: Pending, or
// with a change its agent started under way.
func pausedNode(name string, changing bool) NodeState {
	phase := v1alpha1.PhasePending
	if changing {
		phase = v1alpha1.PhaseRepartitioning
	}
	return pauseHold(NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: phase}, Progressing: true, Changing: changing, Reporting: true})
}

func blockedNode(name string) NodeState {
	return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: v1alpha1.PhaseBlocked}, Failed: true, Reporting: true,
		Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "claim ns/c"}}}
}

func invalidNode(name string) NodeState {
	return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
		Problems: []Problem{{GPU: 1, Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 (A100), rule \"x\": does not fit"}}}
}

func lostNode(name string) NodeState {
	return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: v1alpha1.PhaseUnknown, Message: "no heartbeat"},
		Reporting: true, Lost: true, LostMessage: "no heartbeat"}
}

// condition is the part of a metav1.Condition these tests compare.
type condition struct{ Type, Status, Reason, Message string }

func conditionsOf(cs []metav1.Condition) []condition {
	out := make([]condition, len(cs))
	for i, c := range cs {
		out[i] = condition{c.Type, string(c.Status), c.Reason, c.Message}
	}
	return out
}

func TestConditions(t *testing.T) {
	noConflict := condition{"Conflict", "False", "NoConflict", "no other MigLayout selects these nodes"}
	notPaused := condition{"Paused", "False", "NotPaused", "spec.paused is not set"}
	paused := condition{"Paused", "True", "Paused", "spec.paused is set: no change is started on the nodes; changes under way finish"}
	noProblems := condition{"Degraded", "False", "NoProblems", "no GPU is blocked or failed"}
	stable := condition{"Progressing", "False", "Stable", "no node is changing"}
	tests := map[string]struct {
		obs  Observation
		want []condition
	}{
		"no node selected": {
			obs: Observation{SpecProblems: []SpecProblem{noNodesProblem}},
			want: []condition{
				{"Ready", "False", "NoNodes", "the node selector selects no node"},
				{"Progressing", "False", "NoNodes", "the node selector selects no node"},
				{"Degraded", "True", "NoNodes", "1 spec problem: " + noNodesProblem.Message}, noConflict, notPaused,
			},
		},
		"all ready": {
			obs: Observation{Nodes: []NodeState{readyNode("a"), readyNode("b")}},
			want: []condition{
				{"Ready", "True", "AllNodesReady", "all 2 nodes hold the desired layout"},
				stable, noProblems, noConflict, notPaused,
			},
		},
		"waiting for the agents": {
			obs: Observation{Nodes: []NodeState{silentNode("a"), readyNode("b")}},
			want: []condition{
				{"Ready", "False", "AgentNotReporting", "1 of 2 nodes is not ready: 1 waiting for the agent's report"},
				stable, noProblems, noConflict, notPaused,
			},
		},
		"progressing": {
			obs: Observation{Nodes: []NodeState{progressingNode("a"), silentNode("b"), readyNode("c")}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "2 of 3 nodes are not ready: 1 progressing, 1 waiting for the agent's report"},
				{"Progressing", "True", "Repartitioning", "1 node is on the way to the desired layout: a"},
				noProblems, noConflict, notPaused,
			},
		},
		"invalid layout wins over a blocked GPU as the reason": {
			obs: Observation{Nodes: []NodeState{blockedNode("a"), invalidNode("b")}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "2 of 2 nodes are not ready: 1 failed, 1 blocked"},
				stable,
				{"Degraded", "True", "InvalidLayout", `2 GPU problems: node b gpu 1 (A100), rule "x": does not fit, node a gpu 0: Blocked (DeviceInUse): claim ns/c`},
				noConflict, notPaused,
			},
		},
		"blocked": {
			obs: Observation{Nodes: []NodeState{blockedNode("a")}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "1 of 1 node is not ready: 1 blocked"},
				stable,
				{"Degraded", "True", "DeviceInUse", "1 GPU problem: node a gpu 0: Blocked (DeviceInUse): claim ns/c"},
				noConflict, notPaused,
			},
		},
		"a lost agent": {
			obs: Observation{Nodes: []NodeState{lostNode("a"), silentNode("b"), readyNode("c")}},
			want: []condition{
				{"Ready", "False", "AgentLost", "2 of 3 nodes are not ready: 1 waiting for the agent's report, 1 with a lost agent"},
				stable,
				{"Degraded", "True", "AgentLost", "1 node with a lost agent: node a: no heartbeat"},
				noConflict, notPaused,
			},
		},
		"a lost agent is named first among problems": {
			obs: Observation{Nodes: []NodeState{blockedNode("a"), lostNode("b"), progressingNode("c")}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "3 of 3 nodes are not ready: 1 progressing, 1 blocked, 1 with a lost agent"},
				{"Progressing", "True", "Repartitioning", "1 node is on the way to the desired layout: c"},
				{"Degraded", "True", "AgentLost", "1 node with a lost agent, 1 GPU problem: node b: no heartbeat, node a gpu 0: Blocked (DeviceInUse): claim ns/c"},
				noConflict, notPaused,
			},
		},
		"conflict": {
			obs: Observation{
				Selection: Selection{Nodes: []string{"a", "b"}, Conflicts: map[string][]string{"other": {"b"}}},
				Nodes:     []NodeState{readyNode("a"), ConflictNode("b", "also selected")},
			},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "1 of 2 nodes is not ready: 1 in conflict"},
				stable, noProblems,
				{"Conflict", "True", "OverlappingSelectors", `MigLayout "other" also selects node b; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)`},
				notPaused,
			},
		},
		"paused: a node the rules would change waits, none changing": {
			obs: Observation{Paused: true, Nodes: []NodeState{pausedNode("a", false), readyNode("b")}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "1 of 2 nodes is not ready: 1 paused"},
				{"Progressing", "False", "Paused", "spec.paused is set: no change is started on the nodes; changes under way finish"},
				noProblems, noConflict, paused,
			},
		},
		"paused: a change under way goes on": {
			obs: Observation{Paused: true, Nodes: []NodeState{pausedNode("a", true), pausedNode("b", false)}},
			want: []condition{
				{"Ready", "False", "NodesNotReady", "2 of 2 nodes are not ready: 1 progressing, 1 paused"},
				{"Progressing", "True", "Repartitioning", "1 node is on the way to the desired layout: a"},
				noProblems, noConflict, paused,
			},
		},
		"paused with every node holding its layout": {
			obs: Observation{Paused: true, Nodes: []NodeState{readyNode("a")}},
			want: []condition{
				{"Ready", "True", "AllNodesReady", "its 1 node holds the desired layout"},
				{"Progressing", "False", "Paused", "spec.paused is set: no change is started on the nodes; changes under way finish"},
				noProblems, noConflict, paused,
			},
		},
		"bad selector": {
			obs: Observation{SelectorErr: errors.New("bad operator")},
			want: []condition{
				{"Ready", "False", "InvalidSelector", "bad operator"},
				{"Progressing", "False", "Stable", "no node is selected"},
				{"Degraded", "True", "InvalidSelector", "bad operator"},
				noConflict, notPaused,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.obs.Generation = 7
			got := Conditions(tc.obs)
			if diff := cmp.Diff(tc.want, conditionsOf(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if c.ObservedGeneration != 7 {
					t.Errorf("%s: observedGeneration %d, want 7", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestApplyStatusKeepsTransitionTimes(t *testing.T) {
	var status v1alpha1.MigLayoutStatus
	ApplyStatus(&status, Observation{Generation: 1, Nodes: []NodeState{progressingNode("a")}})
	old := metav1.NewTime(status.Conditions[0].LastTransitionTime.Add(-3600e9))
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = old
	}
	ApplyStatus(&status, Observation{Generation: 2, Nodes: []NodeState{readyNode("a")}})
	want := map[string]bool{"Ready": true, "Progressing": true, "Degraded": false, "Conflict": false}
	for _, c := range status.Conditions {
		if changed := !c.LastTransitionTime.Equal(&old); changed != want[c.Type] {
			t.Errorf("%s: transition time changed = %v, want %v", c.Type, changed, want[c.Type])
		}
	}
	got := []int64{status.ObservedGeneration, int64(status.SelectedNodes), int64(status.ReadyNodes), int64(status.ProgressingNodes), int64(status.FailedNodes)}
	if diff := cmp.Diff([]int64{2, 1, 1, 0, 0}, got); diff != "" {
		t.Errorf("observedGeneration and counts (-want +got):\n%s", diff)
	}
}

// TestDegradedGroupsARuleFailingOnSeveralGPUs: a rule that cannot be
// applied to any of a node's four GPUs is told once for the node, naming
// the GPUs, and still counts four GPU problems.
func TestDegradedGroupsARuleFailingOnSeveralGPUs(t *testing.T) {
	const why = `(NVIDIA A100-SXM4-80GB), rule "halves": 3 instances of 3g.40gb, at most 2 fit`
	var problems []Problem
	for i := range int32(4) {
		problems = append(problems, Problem{GPU: i, Reason: v1alpha1.ReasonInvalidLayout, Message: fmt.Sprintf("gpu %d %s", i, why)})
	}
	problems = append(problems, Problem{GPU: 4, Reason: v1alpha1.ReasonUnknownGPU, Message: "gpu 4 (Tesla T4): no MIG"})
	obs := Observation{Nodes: []NodeState{{Row: v1alpha1.NodeRow{Node: "n"}, Problems: problems, Failed: true}}}
	var st v1alpha1.MigLayoutStatus
	ApplyStatus(&st, obs)
	d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	want := `5 GPU problems: node n gpus 0, 1, 2, 3 ` + why + `, node n gpu 4 (Tesla T4): no MIG`
	if d == nil || d.Message != want {
		t.Errorf("Degraded %+v, want message %q", d, want)
	}
}

// TestDegradedNamesItsReasonFirst: the Degraded message, bounded to a few
// problems, tells them in the order of their reasons, so that the problem
// its reason names is in it however many others come before it in node
// order (nine nodes blocked by a device in use, then a GPU NVML cannot
// read).
func TestDegradedNamesItsReasonFirst(t *testing.T) {
	var nodes []NodeState
	for i := range 9 {
		n := blockedNode(fmt.Sprintf("a%d", i))
		n.Stuck[0].Message = strings.Repeat("claim ns/c ", 20)
		nodes = append(nodes, n)
	}
	unreadable := NodeState{Row: v1alpha1.NodeRow{Node: "z", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
		Stuck: []StuckGPU{{GPU: 3, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: "NVML cannot read the GPU"}}}
	nodes = append(nodes, unreadable)
	obs := Observation{Nodes: nodes, Generation: 1}
	d := meta.FindStatusCondition(Conditions(obs), v1alpha1.ConditionDegraded)
	if d.Reason != v1alpha1.ReasonGPUUnreadable || !strings.HasPrefix(d.Message, "10 GPU problems: node z gpu 3: Failed (GPUUnreadable)") {
		t.Errorf("Degraded %s %q; want GPUUnreadable, naming node z first", d.Reason, d.Message)
	}
}
