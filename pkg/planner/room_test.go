package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRoomTakes: how many pods of a kind a node's room takes, by the
// scarcest resource it lists; a capacity too large for int64 thousandths
// (a virtual node's) counts as unlimited, not as a wrapped-around value.
func TestRoomTakes(t *testing.T) {
	withAlloc := func(alloc corev1.ResourceList, requested ...PriorityRequests) Node {
		return Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: alloc}}, Requested: requested}
	}
	podOf := func(reqs corev1.ResourceList, prio int32) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}}}}}
	}
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	tests := map[string]struct {
		node Node
		pod  *corev1.Pod
		want int
	}{
		"by CPU":        {withAlloc(cpu("8"), PriorityRequests{Requests: cpu("2")}), podOf(cpu("2"), 0), 3},
		"none":          {withAlloc(cpu("8"), PriorityRequests{Requests: cpu("7")}), podOf(cpu("2"), 0), 0},
		"overcommitted": {withAlloc(cpu("8"), PriorityRequests{Requests: cpu("9")}), podOf(cpu("2"), 0), 0},
		// Less than nothing left is room for no pod, not for a negative count.
		"overcommitted by more than a pod asks": {withAlloc(cpu("8"), PriorityRequests{Requests: cpu("13")}), podOf(cpu("2"), 0), 0},
		"lower priority left out":               {withAlloc(cpu("8"), PriorityRequests{Priority: 0, Requests: cpu("8")}), podOf(cpu("2"), 100), 4},
		"by pods": {withAlloc(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("110")},
			PriorityRequests{Requests: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("108")}}), podOf(cpu("1"), 0), 2},
		"a capacity beyond int64 thousandths": {withAlloc(corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("18446744073709552")}),
			podOf(corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, 0), 5},
		"a resource the node does not list": {withAlloc(cpu("8")), podOf(corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}, 0), 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := RequestOf(Pod{Pod: tc.pod})
			if got := NewRoom(tc.node).Takes(q, 5); got != tc.want {
				t.Errorf("takes %d pods, want %d", got, tc.want)
			}
			if got, want := NewRoom(tc.node).Fits(q), tc.want > 0; got != want {
				t.Errorf("fits %t, want %t", got, want)
			}
		})
	}
}
