package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestNominatedPodWaitingForASharedClaimKeepsItsRoom: a pod nominated to a
// node that waits for a claim it shares with a pod served earlier in the
// plan keeps its requests there too: a pod of lower priority planned after
// it that does not fit beside it waits for room.
func TestNominatedPodWaitingForASharedClaimKeepsItsRoom(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	withCPU := func(p Pod, cpu string) Pod {
		p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	// host (a 1g.10gb shared, a 3g.40gb of its own) is planned first, as
	// the larger pod; waiting has a claim of its own besides the shared
	// one, so it waits for the shared claim's allocation.
	host := withCPU(pod("host", 3).priority(10).sharedClaim("c", profileIs("1g.10gb")).claim(profileIs("3g.40gb"), 1).build(), "1")
	waiting := withCPU(pod("waiting", 2).priority(10).sharedClaim("c", profileIs("1g.10gb")).claim(profileIs("1g.10gb"), 1).build(), "2")
	waiting.Pod.Status.NominatedNodeName = "n1"
	late := withCPU(pod("late", 1).claim(profileIs("1g.10gb"), 1).build(), "2")
	got := planTrace(t, []Node{n}, []Pod{host, waiting, late})
	want := map[string]string{"default/waiting": WaitsForSharedClaim, "default/late": WaitsForNodeResources}
	if diff := cmp.Diff(want, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s\nplan: %+v", diff, got)
	}
}

// TestNominatedPodWaitingOnAKeptPlacementKeepsItsRoom: a pod nominated to
// a node that waits, with exactly the claims of a pod planned before it,
// on the placement kept for that pod keeps its requests there: a pod of
// lower priority planned after it that does not fit beside it waits for
// room.
func TestNominatedPodWaitingOnAKeptPlacementKeepsItsRoom(t *testing.T) {
	// The 1g.10gb in use keeps the only 4g.40gb placement from being made.
	n := node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()
	n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	withCPU := func(p Pod, cpu string) Pod {
		p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	keeper := withCPU(pod("keeper", 3).priority(10).sharedClaim("c", profileIs("4g.40gb")).build(), "1")
	waiting := withCPU(pod("waiting", 2).priority(10).sharedClaim("c", profileIs("4g.40gb")).build(), "2")
	waiting.Pod.Status.NominatedNodeName = "n1"
	late := withCPU(pod("late", 1).claim(profileIs("1g.10gb"), 1).build(), "3")
	want := trace{
		Kept:       map[string]string{"default/keeper": "n1/gpu-0 4g.40gb@0", "default/waiting": "n1/gpu-0 4g.40gb@0"},
		Unservable: map[string]string{"default/late": WaitsForNodeResources},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, []Pod{keeper, waiting, late}))
}

// TestNominatedRoomIsKeptOnTheNominatedNode: the requests of a nominated
// pod the plan does not serve are kept on the node it is nominated to,
// not on another: a pod planned after it on another node fits there.
func TestNominatedRoomIsKeptOnTheNominatedNode(t *testing.T) {
	withCPU := func(n Node) Node {
		n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("512Gi")}
		return n
	}
	requesting := func(p Pod, cpu string) Pod {
		p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	nodes := []Node{
		withCPU(node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()),
		// Full: the nominated pod waits for room on its GPU.
		withCPU(node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build()),
	}
	nominated := requesting(pod("nominated", 2).priority(10).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).build(), "4")
	nominated.Pod.Status.NominatedNodeName = "n2"
	late := requesting(pod("late", 1).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("1g.10gb"), 1).build(), "2")
	got := planTrace(t, nodes, []Pod{nominated, late})
	if diff := cmp.Diff(map[string]string{"default/nominated": NoRoom}, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s\nplan: %+v", diff, got)
	}
	if len(got.Served) != 1 || !strings.HasPrefix(got.Served[0], "default/late -> n1 ") {
		t.Errorf("served %v, want default/late on n1", got.Served)
	}
}
