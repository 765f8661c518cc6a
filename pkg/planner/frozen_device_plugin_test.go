package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestFrozenNodeOfTheDevicePluginIsNoWait: a pod whose DeviceClass-backed
// extended resource a Frozen node's device plugin serves is not told it
// waits for that node's agent (kube-scheduler leaves the resource to the
// plugin there: no MIG device made on that node places it), even where a
// pod of the same claims was found to fit on a node of that kind, as
// fitsWhenFree caches by kind of node and claims.
func TestFrozenNodeOfTheDevicePluginIsNoWait(t *testing.T) {
	const gpus = corev1.ResourceName("nvidia.com/gpu")
	withGPUs := func(n Node, count string) Node {
		n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods: resource.MustParse("110"), gpus: resource.MustParse(count)}
		return n
	}
	nodes := []Node{
		withGPUs(node("a-plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").frozenBy("its agent is lost").build(), "8"),
		withGPUs(node("b-tainted").taint("team").gpu("A100-SXM4-80GB", "7g.80gb@0", "").frozenBy("its agent is lost").build(), "0"),
	}
	// plain, older, may run on both nodes and fits on a-plugin once free.
	plain := pod("plain", 2).tolerates("team").claim(profileIs("1g.10gb"), 1).build()
	ext := pod("ext", 1).claim(profileIs("1g.10gb"), 1).build()
	ext.Claims[0].Name = "<extended-resources>ext"
	ext.ExtendedResources = []corev1.ResourceName{gpus}
	ext.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpus: resource.MustParse("1")}}}}
	got := planTrace(t, nodes, []Pod{plain, ext})
	if why := got.Unservable["default/plain"]; why != WaitsForLostNode {
		t.Fatalf("pod plain: unservable %q, want %q", why, WaitsForLostNode)
	}
	if why := got.Unservable["default/ext"]; why == "" || why == WaitsForLostNode {
		t.Errorf("pod whose extended resource only a Frozen node's device plugin serves: unservable %q, want a reason other than %q", why, WaitsForLostNode)
	}
}
