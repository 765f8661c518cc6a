package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
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

// TestInputKeyFollowsWhatNoOtherLineShows: each input below is the only
// thing that changes when it does, so the key must follow it, or the pods
// waiting for it wait for the batcher's refresh: a node frozen or thawed
// (its agent lost or back: no object the key reads changes) and whether
// its agent carries on; a share of another driver's device released;
// another driver's slice republished; a NodeMigLayout written (a GPU's
// change done on the layout it was changing to leaves the GPU's line as
// it was).
func TestInputKeyFollowsWhatNoOtherLineShows(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	p := planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1"}}}
	share := structured.MakeSharedDeviceID(structured.MakeDeviceID("nic.example.com", "n1", "nic-0"), ptr.To(types.UID("s1")))
	nic := func(generation int64) []*resourceapi.ResourceSlice {
		return []*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "n1-nic", Generation: generation}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com"}}}
	}
	nml := func(rv string) AutoInputs {
		return AutoInputs{NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv}}}}
	}
	snap := func(node planner.Node, held planner.OtherHolds) planner.Snapshot {
		return planner.Snapshot{Driver: "mig.miglayout.io", Pending: []planner.Pod{p}, Nodes: []planner.Node{node}, OtherHeld: held}
	}
	for name, tc := range map[string]struct {
		in1, in2     AutoInputs
		snap1, snap2 planner.Snapshot
	}{
		"node frozen": {
			snap1: snap(planner.Node{Node: n}, planner.OtherHolds{}),
			snap2: snap(planner.Node{Node: n, Frozen: true}, planner.OtherHolds{}),
		},
		"frozen node's agent carries on": {
			snap1: snap(planner.Node{Node: n, Frozen: true}, planner.OtherHolds{}),
			snap2: snap(planner.Node{Node: n, Frozen: true, CarriesOn: true}, planner.OtherHolds{}),
		},
		"share released": {
			snap1: snap(planner.Node{Node: n}, planner.OtherHolds{Shares: []structured.SharedDeviceID{share}}),
			snap2: snap(planner.Node{Node: n}, planner.OtherHolds{}),
		},
		"other driver's slice republished": {
			snap1: snap(planner.Node{Node: n, OtherSlices: nic(1)}, planner.OtherHolds{}),
			snap2: snap(planner.Node{Node: n, OtherSlices: nic(2)}, planner.OtherHolds{}),
		},
		"NodeMigLayout written": {
			in1: nml("1"), in2: nml("2"),
			snap1: snap(planner.Node{Node: n}, planner.OtherHolds{}),
			snap2: snap(planner.Node{Node: n}, planner.OtherHolds{}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			if inputKey(tc.in1, tc.snap1) == inputKey(tc.in2, tc.snap2) {
				t.Error("the input changed and the key did not")
			}
		})
	}
}
