package planner

import (
	"slices"
	"testing"
)

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
		pod("first", 5).claim(profileIs("3g.40gb"), 1).build(),
		pod("nvidia", 1).claim("device.attributes['mig.miglayout.io'].memory >= 9000 && device.attributes['mig.miglayout.io'].brand == 'Nvidia'", 1).build(),
	}})
	want := trace{
		Changes: []string{"n1/0: (empty) -> 3g.40gb@4 serves default/first", "n1/1: (empty) -> 1g.10gb@6 serves default/nvidia"},
		Served:  []string{"default/first -> n1 gpu-0-mig-3g40gb-9-4 after change", "default/nvidia -> n1 gpu-1-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, toTrace(res))
}

// TestReplayOnNodeOfTwoModelsWherePodsAreExactPerModel: on a node of an
// A100 (free 1g.10gb@6) and an empty A30, "old" asks for the 1g of
// whichever model (one profile per model: exact on each) and "young" for a
// 1g.6gb. Planned first-fit decreasing, old gets the A100's 1g.10gb and a
// 1g.6gb is made for young on the A30; but kube-scheduler, taking old
// first, gives it the smaller 1g.6gb (first in publication order), and
// young nothing. The replay catches it: young is not promised that device
// (it is planned again once old is bound), old keeps the free 1g.10gb.
func TestReplayOnNodeOfTwoModelsWherePodsAreExactPerModel(t *testing.T) {
	n := node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", "4g.40gb@0,2g.20gb@4").
		gpu("A30-24GB", "", "").build()
	res := replayed(t, Snapshot{Nodes: []Node{n}, Pending: []Pod{
		pod("old", 10).claim("device.attributes['mig.miglayout.io'].profile in ['1g.5gb', '1g.6gb', '1g.10gb']", 1).build(),
		pod("young", 1).claim(profileIs("1g.6gb"), 1).build(),
	}})
	if got := toTrace(res).Served; !slices.Contains(got, "default/old -> n1 gpu-0-mig-1g10gb-19-6") {
		t.Errorf("served %v, want old on the A100's free 1g.10gb", got)
	}
}
