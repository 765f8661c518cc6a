package controller

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestPendingShapesBoundedAndByKind: pending pods are grouped into kinds
// by what they request, their priority and their preemption policy, each
// kind counted; no more than maxRoomShapes kinds are followed however many
// there are, while every resource any of them requests is named.
func TestPendingShapesBoundedAndByKind(t *testing.T) {
	withCPU := func(name, cpu string) *corev1.Pod {
		p := autoPod(name, h0(), "c-"+name)
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	t.Run("bounded", func(t *testing.T) {
		var snap planner.Snapshot
		for i := range maxRoomShapes + 6 {
			snap.Pending = append(snap.Pending, planner.Pod{Pod: withCPU(fmt.Sprint("p", i), fmt.Sprintf("%dm", 100+i))})
		}
		shapes, requested := pendingShapes(snap)
		if len(shapes) != maxRoomShapes {
			t.Errorf("%d kinds of pods followed, want %d", len(shapes), maxRoomShapes)
		}
		if !requested[corev1.ResourceCPU] {
			t.Errorf("resources requested %v, want cpu among them", requested)
		}
	})
	t.Run("preemption policy", func(t *testing.T) {
		never := withCPU("never", "1")
		never.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
		shapes, _ := pendingShapes(planner.Snapshot{Pending: []planner.Pod{{Pod: withCPU("a", "1")}, {Pod: withCPU("b", "1")}, {Pod: never}}})
		var counts []int
		for _, s := range shapes {
			counts = append(counts, s.count)
		}
		if len(counts) != 2 {
			t.Errorf("kinds of pods counted %v, want two (2 pods that may preempt, 1 that may not)", counts)
		}
	})
}
