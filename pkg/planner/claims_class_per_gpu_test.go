package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestDeviceClassReadingPerGPUAttribute: a DeviceClass whose selectors
// read a per-GPU attribute (the node's driver version) makes the claims
// naming it judged on each GPU's own devices, as a claim's own selector
// does: the pod is served on the node whose driver the class accepts.
func TestDeviceClassReadingPerGPUAttribute(t *testing.T) {
	recent := migClass()
	recent.Name = "mig-recent-driver"
	recent.Spec.Selectors = append(recent.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['mig.miglayout.io'].driverVersion.compareTo(semver('560.0.0')) >= 0"}})
	nodes := []Node{
		node("old").gpu("A100-SXM4-80GB", "", "").driver("550.54.15").build(),
		node("new").gpu("A100-SXM4-80GB", "", "").driver("570.86.10").build(),
	}
	p := pod("p", 1).claim(profileIs("1g.10gb"), 1).build()
	p.Claims[0].Spec.Devices.Requests[0].Exactly.DeviceClassName = recent.Name
	want := trace{
		Changes: []string{"new/0: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> new gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, nodes, []Pod{p}, recent))
}
