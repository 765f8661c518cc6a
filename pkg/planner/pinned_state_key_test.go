package planner

import "testing"

// TestDeviceMadeForAPlacementLeavesNoStaleNodeState: a device made for a
// claim that reads its placement start is fixed where it is made (no longer
// movable by later additions), and the GPU's class says so. n1's 3g.40gb@4
// made for "placed" is fixed; n2's 3g.40gb for "plain" may still move to
// @0. Were n1's GPU still keyed as holding a movable device, n1 and n2
// would look alike, and "pair" (2g.20gb and 1g.10gb), which n1 refuses,
// would not be tried on n2, which serves it.
func TestDeviceMadeForAPlacementLeavesNoStaleNodeState(t *testing.T) {
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "", "").tainted("2g.20gb@0,2g.20gb@2").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build(),
		node("n2").gpu("A100-SXM4-80GB", "", "").tainted("2g.20gb@0,2g.20gb@2").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build(),
	}
	pair := pod("pair", 1).claim(profileIs("2g.20gb"), 1)
	pair.p.Claims[0].Name = "pair-a"
	pods := []Pod{
		pod("placed", 1).priority(100).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].placementStart == 4", 1).build(),
		pod("plain", 1).priority(100).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("3g.40gb"), 1).build(),
		pair.claim(profileIs("1g.10gb"), 1).build(),
	}
	want := trace{
		Changes: []string{
			"n1/0: (empty) -> 3g.40gb@4 serves default/placed",
			"n2/0: (empty) -> 3g.40gb@0,2g.20gb@4 serves default/plain, default/pair",
		},
		Served: []string{
			"default/placed -> n1 gpu-0-mig-3g40gb-9-4 after change",
			"default/plain -> n2 gpu-0-mig-3g40gb-9-0 after change",
			"default/pair -> n2 gpu-0-mig-2g20gb-14-4, gpu-1-mig-1g10gb-19-6 after change",
		},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}
