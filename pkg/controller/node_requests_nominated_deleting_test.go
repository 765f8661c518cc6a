package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeRequestsSkipNominatedPodBeingDeleted: an unbound pod that a
// preemption nominated to a node keeps no room there once it is being
// deleted: it will never be bound there. A bound pod being deleted still
// counts until it is gone.
func TestNodeRequestsSkipNominatedPodBeingDeleted(t *testing.T) {
	deleted := &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	nominated := *cpus(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nominated", UID: "uid-nominated", DeletionTimestamp: deleted},
		Status: corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "a"}}, "2")
	bound := *cpus(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound", UID: "uid-bound", DeletionTimestamp: deleted},
		Spec: corev1.PodSpec{NodeName: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "1")
	got := nodeRequests([]corev1.Pod{nominated, bound}, func(string) bool { return true }, func(*corev1.Pod) bool { return false })
	var texts []string
	for _, pr := range got["a"] {
		texts = append(texts, resourcesText(pr.Requests))
	}
	if len(texts) != 1 || texts[0] != "cpu=1,pods=1" {
		t.Errorf("node a's requests %v, want [cpu=1,pods=1] (the bound pod only)", texts)
	}
}
