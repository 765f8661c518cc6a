package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestInputKeyChangesAtTheInstantAPodAges: the pass nextAging wakes for, at
// the very instant a pending pod has waited AgingAfter (when the planner
// starts to plan it by age), sees a new key and plans again; the instant
// before, nothing is new.
func TestInputKeyChangesAtTheInstantAPodAges(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	p := planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created)}}}
	const aging = 5 * time.Minute
	snapAt := func(now time.Time) planner.Snapshot {
		return planner.Snapshot{Pending: []planner.Pod{p}, Now: now, AgingAfter: aging}
	}
	before := created.Add(aging - time.Nanosecond)
	if wake := nextAging(snapAt(before)); wake != time.Nanosecond {
		t.Fatalf("nextAging a nanosecond before the pod ages = %s, want 1ns", wake)
	}
	if inputKey(AutoInputs{}, snapAt(before)) == inputKey(AutoInputs{}, snapAt(created.Add(aging))) {
		t.Error("the key at the instant the pod has waited AgingAfter is the one of the instant before: the pass woken then plans nothing")
	}
}

// TestInputKeyFollowsRequiredNodeAffinityLabels: a node label that a pending
// pod's required node affinity reads (not its nodeSelector) decides where
// the pod may go: changing it changes the key.
func TestInputKeyFollowsRequiredNodeAffinityLabels(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1"},
		Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}},
		}}}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	key := func() string {
		return inputKey(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}, Nodes: []planner.Node{{Node: n}}})
	}
	k0 := key()
	n.Labels["zone"] = "b"
	if key() == k0 {
		t.Error("a label the pending pod's required node affinity reads changed, and the key did not")
	}
}
