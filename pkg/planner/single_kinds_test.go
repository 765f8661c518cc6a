package planner

import "testing"

// TestSingleDeviceServedByOneKindOfGPUAmongSeveral: a pod whose claim only
// one of the snapshot's kinds of GPU satisfies is served on that kind,
// whichever kind comes last.
func TestSingleDeviceServedByOneKindOfGPUAmongSeveral(t *testing.T) {
	nodes := []Node{
		node("a100").gpu("A100-SXM4-80GB", "", "").build(),
		node("a30").gpu("A30", "", "").build(),
	}
	pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb"), 1).build()}
	want := trace{
		Changes: []string{"a100/0: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> a100 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}
