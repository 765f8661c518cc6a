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

// TestApplyStatusCountsBlockedNodesAsFailed: failedNodes counts every
// failed node, those whose worst GPU is Blocked (waiting for a device in
// use) as well as those with a rule that failed.
func TestApplyStatusCountsBlockedNodesAsFailed(t *testing.T) {
	var status v1alpha1.MigLayoutStatus
	ApplyStatus(&status, Observation{Generation: 1, Nodes: []NodeState{blockedNode("a"), invalidNode("b"), readyNode("c")}})
	got := []int32{status.SelectedNodes, status.ReadyNodes, status.ProgressingNodes, status.FailedNodes}
	if diff := cmp.Diff([]int32{3, 1, 0, 2}, got); diff != "" {
		t.Errorf("selected, ready, progressing and failed nodes (-want +got):\n%s", diff)
	}
}

// TestConditionMessagesAreBounded: a condition message longer than the
// bound (an invalid selector's long error) is cut to it, with an ellipsis.
func TestConditionMessagesAreBounded(t *testing.T) {
	long := errors.New(strings.Repeat("x", 3*maxConditionMessage))
	for _, c := range Conditions(Observation{SelectorErr: long}) {
		if len(c.Message) > maxConditionMessage {
			t.Errorf("%s: message of %d bytes, want at most %d", c.Type, len(c.Message), maxConditionMessage)
		}
		if c.Type == v1alpha1.ConditionReady && !strings.HasSuffix(c.Message, "...") {
			t.Errorf("Ready: message %q... does not end with an ellipsis", c.Message[:40])
		}
	}
}

// TestProgressingCountsNodesChangingBesideAFailedGPU: a node with a GPU
// repartitioning beside a Blocked one is Failed, not Progressing, yet
// counts in the Progressing message as a node on the way.
func TestProgressingCountsNodesChangingBesideAFailedGPU(t *testing.T) {
	nml := nodeMigLayout("n1").
		spec(specGPU(0, wholeLayout, ""), specGPU(1, halvesLayout, "")).
		status(
			a100(0).layout(halvesLayout).inUse("3g.40gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use"),
			a100(1).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", ""),
		).build()
	var status v1alpha1.MigLayoutStatus
	ApplyStatus(&status, Observation{Generation: 1, Nodes: []NodeState{EvaluateNode("n1", nml, nil, AgentHealth{}), readyNode("n2")}})
	p := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionProgressing)
	want := condition{"Progressing", "True", v1alpha1.ReasonRepartitioning, "1 node is on the way to the desired layout: n1"}
	if p == nil {
		t.Fatal("no Progressing condition")
	}
	if diff := cmp.Diff(want, conditionsOf([]metav1.Condition{*p})[0]); diff != "" {
		t.Errorf("Progressing (-want +got):\n%s", diff)
	}
}

// TestDegradedMessageTellsUnorderedReasonsLast: a problem under a reason
// outside the order of Degraded's reasons (an agent's own) is told after
// those under a known reason, whichever node it is on.
func TestDegradedMessageTellsUnorderedReasonsLast(t *testing.T) {
	nodes := []NodeState{
		{Row: v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
			Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: "VendorError", Message: "odd"}}},
		blockedNode("b"),
	}
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: nodes})) {
		got[c.Type] = c
	}
	want := condition{"Degraded", "True", v1alpha1.ReasonDeviceInUse,
		"2 GPU problems: node b gpu 0: Blocked (DeviceInUse): claim ns/c, node a gpu 0: Failed (VendorError): odd"}
	if diff := cmp.Diff(want, got[v1alpha1.ConditionDegraded]); diff != "" {
		t.Errorf("Degraded (-want +got):\n%s", diff)
	}
}

// TestDegradedCountsAndNamesAWriteRefusal: a node whose NodeMigLayout the
// API server refused is counted and named in Degraded, even as the only
// such node.
func TestDegradedCountsAndNamesAWriteRefusal(t *testing.T) {
	st := withWriteError(readyNode("a"), errors.New("denied by policy"))
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: []NodeState{st, readyNode("b")}})) {
		got[c.Type] = c
	}
	want := condition{"Degraded", "True", v1alpha1.ReasonNodeMigLayoutWriteFailed,
		"1 node whose NodeMigLayout could not be written: node a: " + msgWriteFailed + ": denied by policy"}
	if diff := cmp.Diff(want, got[v1alpha1.ConditionDegraded]); diff != "" {
		t.Errorf("Degraded (-want +got):\n%s", diff)
	}
}

// TestDegradedReasonSeesProblemsToldTogether: two GPUs of a node whose
// problems read alike are told once, under the first one's reason, but
// Degraded's reason is still the most pressing of both.
func TestDegradedReasonSeesProblemsToldTogether(t *testing.T) {
	n := NodeState{Row: v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
		Problems: []Problem{
			{GPU: 0, Reason: v1alpha1.ReasonUnknownGPU, Message: "gpu 0 cannot be configured"},
			{GPU: 1, Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 cannot be configured"},
		}}
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: []NodeState{n}})) {
		got[c.Type] = c
	}
	want := condition{"Degraded", "True", v1alpha1.ReasonInvalidLayout, "2 GPU problems: node a gpus 0, 1 cannot be configured"}
	if diff := cmp.Diff(want, got[v1alpha1.ConditionDegraded]); diff != "" {
		t.Errorf("Degraded (-want +got):\n%s", diff)
	}
}

// TestDegradedStuckGPUWithoutMessage: a GPU the agent reports Blocked
// without a message is told by its phase and reason alone.
func TestDegradedStuckGPUWithoutMessage(t *testing.T) {
	n := blockedNode("a")
	n.Stuck[0].Message = ""
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: []NodeState{n}})) {
		got[c.Type] = c
	}
	want := condition{"Degraded", "True", v1alpha1.ReasonDeviceInUse, "1 GPU problem: node a gpu 0: Blocked (DeviceInUse)"}
	if diff := cmp.Diff(want, got[v1alpha1.ConditionDegraded]); diff != "" {
		t.Errorf("Degraded (-want +got):\n%s", diff)
	}
}

// TestConditionMessagesNameBoundedLists: Degraded tells at most eight
// problems and Progressing names at most ten nodes, each saying how many
// more there are.
func TestConditionMessagesNameBoundedLists(t *testing.T) {
	var nodes []NodeState
	var names []string
	for i := range 11 {
		name := fmt.Sprintf("n%02d", i)
		n := progressingNode(name)
		n.Stuck = []StuckGPU{{GPU: 0, Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPassFailed, Message: "retrying"}}
		nodes = append(nodes, n)
		names = append(names, name)
	}
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: nodes})) {
		got[c.Type] = c
	}
	var told []string
	for _, name := range names[:8] {
		told = append(told, "node "+name+" gpu 0: Pending (PassFailed): retrying")
	}
	want := map[string]string{
		v1alpha1.ConditionProgressing: "11 nodes are on the way to the desired layout: " + strings.Join(names[:10], ", ") + " and 1 more",
		v1alpha1.ConditionDegraded:    "11 GPU problems: " + strings.Join(told, ", ") + " and 3 more",
	}
	for typ, msg := range want {
		if diff := cmp.Diff(msg, got[typ].Message); diff != "" {
			t.Errorf("%s message (-want +got):\n%s", typ, diff)
		}
	}
}
