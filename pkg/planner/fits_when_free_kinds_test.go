package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestFitsWhenFreeTellsNodesApart: whether a pod of several devices only
// waits for room (NoRoom) is judged on each node that could hold it with
// every GPU free, not taken from a node of the same GPUs that could not:
// one whose policy allows other profiles, whose GPU the pod's claim does
// not name, or that lacks another driver's device the pod asks for.
func TestFitsWhenFreeTellsNodesApart(t *testing.T) {
	tests := map[string]struct {
		nodes   []Node
		pod     Pod
		classes []*resourceapi.DeviceClass
	}{
		"the first node's policy allows only 1g.10gb": {
			nodes: []Node{
				node("n1").policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
			},
			pod: pod("pair", 1).claim(profileIs("3g.40gb"), 2).build(),
		},
		"the claim names the second node's GPU": {
			nodes: []Node{
				withUUIDs(node("n1").gpu("A100-SXM4-80GB", "", "").build()),
				withUUIDs(node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build()),
			},
			pod: pod("pair", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].parentUUID == 'GPU-n2-0'", 2).build(),
		},
		"the claim names the second node's GPU by its PCI bus ID": {
			nodes: []Node{
				withPCIBusIDs(node("n1").gpu("A100-SXM4-80GB", "", "").build(), "0000:07:00.0"),
				withPCIBusIDs(node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(), "0000:08:00.0"),
			},
			pod: pod("pair", 1).claim(profileIs("3g.40gb")+" && device.attributes['resource.kubernetes.io'].pciBusID == '0000:08:00.0'", 2).build(),
		},
		"only the second node has the other driver's device": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").build(),
				withOtherSlices(node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(), nicSlice("n2", "nic-0")),
			},
			pod:     pod("pair", 1).claim(profileIs("3g.40gb"), 1).withNIC().build(),
			classes: []*resourceapi.DeviceClass{nicClass()},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := trace{Unservable: map[string]string{"default/pair": NoRoom}}
			checkTrace(t, want, planTrace(t, tc.nodes, []Pod{tc.pod}, tc.classes...))
		})
	}
}

// withOtherSlices gives n other drivers' slices (Node.OtherSlices).
func withOtherSlices(n Node, s ...*resourceapi.ResourceSlice) Node {
	n.OtherSlices = s
	return n
}

// withPCIBusIDs gives the GPUs of n the PCI bus IDs ids, in order.
func withPCIBusIDs(n Node, ids ...string) Node {
	for i, id := range ids {
		n.GPUs[i].Info.PCIBusID = id
	}
	return n
}
