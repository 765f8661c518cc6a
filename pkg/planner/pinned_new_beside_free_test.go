package planner

import "testing"

// TestPerGPUPodGetsANewDeviceBesideAFreeOneTheSchedulerGivesAway: pod b
// asks for a 1g.10gb of GPU 1, whose one free 1g.10gb (at placement 6)
// kube-scheduler gives pod a, taken first (priority 10), since it comes
// first in the publication order. GPU 1 has room for another 1g.10gb
// beside its free devices: b is served by making one there, not told it
// waits for room.
func TestPerGPUPodGetsANewDeviceBesideAFreeOneTheSchedulerGivesAway(t *testing.T) {
	nodes := []Node{node("n1").
		gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
		gpu("A100-SXM4-80GB", "2g.20gb@4,1g.10gb@6", "").build()}
	pods := []Pod{
		pod("a", 1).priority(10).claim(profileIs("1g.10gb"), 1).build(),
		pod("b", 5).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 1", 1).build(),
	}
	checkTrace(t, trace{
		Changes: []string{"n1/1: 2g.20gb@4,1g.10gb@6 -> 1g.10gb@0,2g.20gb@4,1g.10gb@6 serves default/b"},
		Served:  []string{"default/a -> n1 gpu-0-mig-1g10gb-19-0", "default/b -> n1 gpu-1-mig-1g10gb-19-0 after change"},
	}, planTrace(t, nodes, pods))
}
