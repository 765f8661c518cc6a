package planner

import (
	"strings"
	"testing"
)

// TestDevicePluginNodeJudgedForEachPod: a node whose device plugin serves
// a pod's DeviceClass-backed extended resource is left out for that pod,
// even after a pod of the same node selector, affinity, tolerations and
// requests, without that extended resource, was planned there.
func TestDevicePluginNodeJudgedForEachPod(t *testing.T) {
	nodes := []Node{
		withPluginGPUs(node("a-plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"),
		withPluginGPUs(node("b-dra").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "0"),
	}
	plain := pod("plain", 2).claim(profileIs("1g.10gb"), 1).build()
	ext := asExtendedResource(pod("ext", 1).claim(profileIs("1g.10gb"), 1).build())
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
