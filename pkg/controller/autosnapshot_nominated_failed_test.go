package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestKeepNominatedRoomSkipsFailedPod: an unbound pod nominated to an Auto
// node that has failed keeps no room there: kube-scheduler keeps none for
// a pod that has ended, Succeeded or Failed.
func TestKeepNominatedRoomSkipsFailedPod(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		t.Run(string(phase), func(t *testing.T) {
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
				Status: corev1.PodStatus{NominatedNodeName: "n1", Phase: phase}}
			snap := planner.Snapshot{Nodes: []planner.Node{{Node: node("n1", nil)}}}
			keepNominatedRoom([]corev1.Pod{pod}, &snap, func(*corev1.Pod) bool { return true })
			if got := snap.Nodes[0].Requested; len(got) != 0 {
				t.Errorf("n1's requested %v, want none for a %s pod", got, phase)
			}
		})
	}
}
