package planner

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// topologyNode is node name of two empty A100s (MaxGPUsPerNode 2), GPU i
// on NUMA node numa[i] and PCIe root roots[i].
func topologyNode(name string, numa [2]int, roots [2]string) Node {
	n := withUUIDs(node(name).policy(Policy{MaxGPUsPerNode: 2}).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build())
	for i := range n.GPUs {
		n.GPUs[i].Info.NUMANode = ptr.To(numa[i])
		n.GPUs[i].Info.PCIeRoot = roots[i]
	}
	return n
}

// nicOnRoot is n with one NIC of the other driver, on PCIe root root.
func nicOnRoot(n Node, root string) Node {
	s := nicSlice(n.Node.Name, "nic0")
	s.Spec.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"resource.kubernetes.io/pcieRoot": {StringValue: &root}}
	n.OtherSlices = append(n.OtherSlices, s)
	return n
}

// nic adds to the pod's last claim a request for one NIC.
func (b *podB) nic() *podB {
	c := b.p.Claims[len(b.p.Claims)-1]
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}})
	return b
}

// constrain adds to the pod's last claim a constraint on attr, for the
// requests named (all where none is): all their devices share it (match)
// or none do (distinct).
func (b *podB) constrain(attr string, distinct bool, requests ...string) *podB {
	c := b.p.Claims[len(b.p.Claims)-1]
	name := resourceapi.FullyQualifiedName(attr)
	k := resourceapi.DeviceConstraint{Requests: requests, MatchAttribute: &name}
	if distinct {
		k = resourceapi.DeviceConstraint{Requests: requests, DistinctAttribute: &name}
	}
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, k)
	return b
}

// TestTopology: the standard topology attributes every GPU publishes
// (resource.kubernetes.io/numaNode and pcieRoot) tell GPUs of one model
// apart, in a selector or a constraint, as they do for kube-scheduler; a
// distinctAttribute constraint puts each device on its own GPU.
func TestTopology(t *testing.T) {
	const numa, root = "resource.kubernetes.io/numaNode", "resource.kubernetes.io/pcieRoot"
	split := [2]string{"pci0000:00", "pci0000:80"}
	tests := map[string]struct {
		nodes []Node
		pod   *podB
		want  trace
	}{
		"a selector on the NUMA node": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split)},
			pod:   pod("p", 1).claim(profileIs("3g.40gb")+" && device.attributes['resource.kubernetes.io'].numaNode == 1", 1),
			want:  trace{Changes: []string{"a/1: (empty) -> 3g.40gb@4 serves default/p"}, Served: []string{"default/p -> a gpu-1-mig-3g40gb-9-4 after change"}},
		},
		"a selector on the PCIe root": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split)},
			pod:   pod("p", 1).claim(profileIs("3g.40gb")+" && device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'", 1),
			want:  trace{Changes: []string{"a/0: (empty) -> 3g.40gb@4 serves default/p"}, Served: []string{"default/p -> a gpu-0-mig-3g40gb-9-4 after change"}},
		},
		"one NUMA node: not on a node like one that failed but for its topology": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split), topologyNode("b", [2]int{0, 0}, split)},
			pod:   pod("p", 1).claim(profileIs("7g.80gb"), 2).constrain(numa, false),
			want:  trace{Changes: []string{"b/0: (empty) -> 7g.80gb@0 serves default/p", "b/1: (empty) -> 7g.80gb@0 serves default/p"}, Served: []string{"default/p -> b gpu-0-mig-7g80gb-0-0, gpu-1-mig-7g80gb-0-0 after change"}},
		},
		"one PCIe root": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split), topologyNode("b", [2]int{0, 1}, [2]string{"pci0000:00", "pci0000:00"})},
			pod:   pod("p", 1).claim(profileIs("7g.80gb"), 2).constrain(root, false),
			want:  trace{Changes: []string{"b/0: (empty) -> 7g.80gb@0 serves default/p", "b/1: (empty) -> 7g.80gb@0 serves default/p"}, Served: []string{"default/p -> b gpu-0-mig-7g80gb-0-0, gpu-1-mig-7g80gb-0-0 after change"}},
		},
		"a GPU and a NIC on one PCIe root": {
			nodes: []Node{nicOnRoot(topologyNode("a", [2]int{0, 1}, split), "pci0000:00")},
			pod:   pod("p", 1).claim(profileIs("3g.40gb"), 1).nic().constrain(root, false),
			want:  trace{Changes: []string{"a/0: (empty) -> 3g.40gb@4 serves default/p"}, Served: []string{"default/p -> a gpu-0-mig-3g40gb-9-4 after change"}},
		},
		"each device on its own GPU, free already": {
			nodes: []Node{withUUIDs(node("a").policy(Policy{MaxGPUsPerNode: 2}).gpu("A100-SXM4-80GB", "3g.40gb@4", "").gpu("A100-SXM4-80GB", "3g.40gb@4", "").build())},
			pod:   pod("p", 1).claim(profileIs("3g.40gb"), 2).constrain(driver+"/parentUUID", true),
			want:  trace{Served: []string{"default/p -> a gpu-0-mig-3g40gb-9-4, gpu-1-mig-3g40gb-9-4"}},
		},
		"the constrained devices each on its own GPU, another beside one": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split)},
			pod:   pod("p", 1).claim(profileIs("3g.40gb"), 2).request("small", profileIs("1g.10gb")).constrain(driver+"/parentUUID", true, "gpu"),
			want: trace{Changes: []string{"a/0: (empty) -> 3g.40gb@4 serves default/p", "a/1: (empty) -> 1g.10gb@0,3g.40gb@4 serves default/p"},
				Served: []string{"default/p -> a gpu-0-mig-3g40gb-9-4, gpu-1-mig-3g40gb-9-4, gpu-1-mig-1g10gb-19-0 after change"}},
		},
		"each device on its own GPU": {
			nodes: []Node{topologyNode("a", [2]int{0, 1}, split)},
			pod:   pod("p", 1).claim(profileIs("3g.40gb"), 2).constrain(driver+"/parentUUID", true),
			want:  trace{Changes: []string{"a/0: (empty) -> 3g.40gb@4 serves default/p", "a/1: (empty) -> 3g.40gb@4 serves default/p"}, Served: []string{"default/p -> a gpu-0-mig-3g40gb-9-4, gpu-1-mig-3g40gb-9-4 after change"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, []Pod{tc.pod.build()}, nicClass()))
		})
	}
}

// TestRequestWithoutDevices: a claim request with neither exactly nor
// firstAvailable, which the API server refuses, makes its pod unservable
// with the reason, not the plan panic; other pods are planned.
func TestRequestWithoutDevices(t *testing.T) {
	bad := pod("bad", 1).claim(profileIs("3g.40gb"), 1).build()
	bad.Claims[0].Spec.Devices.Requests = append(bad.Claims[0].Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "x"})
	got := planTrace(t, []Node{node("a").gpu("A100-SXM4-80GB", "", "").build()}, []Pod{bad, pod("good", 1).claim(profileIs("3g.40gb"), 1).build()})
	if why := got.Unservable["default/bad"]; !strings.Contains(why, `request "x" has neither exactly nor firstAvailable`) {
		t.Errorf("bad pod: %q, want the request named", why)
	}
	if len(got.Served) != 1 || !strings.HasPrefix(got.Served[0], "default/good") {
		t.Errorf("served %v, want the good pod", got.Served)
	}
}
