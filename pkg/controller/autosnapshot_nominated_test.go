package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestKeepNominatedRoomCountsOnlyUnboundNonDemand: the room kube-scheduler
// keeps on an Auto node for a pod a preemption nominated there is added
// to the node's requests only for an unbound pod that asks for devices and
// is no Auto demand, not being deleted and not done: a bound pod counts
// already (nodeRequests), Auto demand is planned with its room, and a pod
// asking for no device counts already (nodeRequests).
func TestKeepNominatedRoomCountsOnlyUnboundNonDemand(t *testing.T) {
	base := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
		Status: corev1.PodStatus{NominatedNodeName: "n1"}}
	for name, tc := range map[string]struct {
		edit     func(p *corev1.Pod)
		demand   bool
		devices  bool
		wantRoom bool
	}{
		"unbound, asks for devices": {edit: func(*corev1.Pod) {}, devices: true, wantRoom: true},
		"bound":                     {edit: func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, devices: true},
		"auto demand":               {edit: func(*corev1.Pod) {}, devices: true, demand: true},
		"asks for no device":        {edit: func(*corev1.Pod) {}},
		"being deleted": {edit: func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		}, devices: true},
		"succeeded":                 {edit: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, devices: true},
		"nominated to another node": {edit: func(p *corev1.Pod) { p.Status.NominatedNodeName = "n2" }, devices: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := *base.DeepCopy()
			tc.edit(&pod)
			snap := planner.Snapshot{Nodes: []planner.Node{{Node: node("n1", nil)}}}
			if tc.demand {
				snap.Pending = []planner.Pod{{Pod: &pod}}
			}
			keepNominatedRoom([]corev1.Pod{pod}, &snap, func(*corev1.Pod) bool { return tc.devices })
			var got []string
			for _, pr := range snap.Nodes[0].Requested {
				got = append(got, resourcesText(pr.Requests))
			}
			var want []string
			if tc.wantRoom {
				want = []string{"cpu=3,pods=1"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("n1's requested (-want +got):\n%s", diff)
			}
		})
	}
}
