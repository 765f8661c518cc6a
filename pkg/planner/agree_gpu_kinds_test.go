package planner

import "testing"

// TestReplayOnNodeOfTwoKindsOfGPU: on a node whose GPUs of one model
// publish different attributes (here the brand), kube-scheduler's replay
// judges each pod on each GPU's own devices: a pod that accepts any device
// of the second GPU's brand only, planned after another on the node, is
// served on the second GPU, not refused for what the first GPU publishes.
func TestReplayOnNodeOfTwoKindsOfGPU(t *testing.T) {
	n := node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "", "").brand("Tesla").
		gpu("A100-SXM4-80GB", "", "").build()
	res := replayed(t, Snapshot{Nodes: []Node{n}, Pending: []Pod{
		pod("first", 1).claim(profileIs("3g.40gb"), 1).build(),
		pod("nvidia", 5).claim("device.attributes['mig.miglayout.io'].memory >= 9000 && device.attributes['mig.miglayout.io'].brand == 'Nvidia'", 1).build(),
	}})
	want := trace{
		Changes: []string{"n1/0: (empty) -> 3g.40gb@4 serves default/first", "n1/1: (empty) -> 1g.10gb@6 serves default/nvidia"},
		Served:  []string{"default/first -> n1 gpu-0-mig-3g40gb-9-4 after change", "default/nvidia -> n1 gpu-1-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, toTrace(res))
}
