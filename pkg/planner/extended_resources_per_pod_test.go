package planner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDevicePluginNodeJudgedForEachPod: a node whose device plugin serves
// a pod's DeviceClass-backed extended resource is left out for that pod,
// even after a pod of the same node selector, affinity, tolerations and
// requests, without that extended resource, was planned there.
func TestDevicePluginNodeJudgedForEachPod(t *testing.T) {
	const gpus = corev1.ResourceName("nvidia.com/gpu")
	withGPUs := func(n Node, count string) Node {
		n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods: resource.MustParse("110"), gpus: resource.MustParse(count)}
		return n
	}
	nodes := []Node{
		withGPUs(node("a-plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"),
		withGPUs(node("b-dra").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "0"),
	}
	plain := pod("plain", 2).claim(profileIs("1g.10gb"), 1).build()
	ext := pod("ext", 1).claim(profileIs("1g.10gb"), 1).build()
	ext.Claims[0].Name = "<extended-resources>ext"
	ext.ExtendedResources = []corev1.ResourceName{gpus}
	ext.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpus: resource.MustParse("1")}}}}
	got := planTrace(t, nodes, []Pod{plain, ext})
	served := false
	for _, s := range got.Served {
		if !strings.HasPrefix(s, "default/ext -> ") {
			continue
		}
		served = true
		if !strings.HasPrefix(s, "default/ext -> b-dra ") {
			t.Errorf("pod planned on the node whose device plugin serves its extended resource: %s", s)
		}
	}
	if !served {
		t.Errorf("pod not served on the node without the device plugin: %+v", got)
	}
}
