package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestRoomInInputKeyForEachKindOfPod: the key follows the room a node has
// for each kind of pending pod, not only the first: with a pod of 1 CPU
// and one of 4 CPUs pending, room freeing up for the 4-CPU pod alone (the
// 1-CPU one fit before) changes the key.
func TestRoomInInputKeyForEachKindOfPod(t *testing.T) {
	n1 := node("n1", map[string]string{"pool": "auto"})
	n1.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	withCPU := func(name, cpu string) *corev1.Pod {
		p := autoPod(name, h0(), "c-"+name)
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	small, large := withCPU("small", "1"), withCPU("large", "4")
	key := func(used string) string {
		prs := []planner.PriorityRequests{{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(used)}}}
		snap := planner.Snapshot{Nodes: []planner.Node{{Node: n1, Requested: prs}}, Pending: []planner.Pod{{Pod: small}, {Pod: large}}}
		return inputKey(AutoInputs{}, snap)
	}
	if key("6") == key("2") {
		t.Error("the key did not change though the 4-CPU pod has room now")
	}
}
