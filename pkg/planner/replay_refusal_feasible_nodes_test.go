package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestReplayRefusalTriesOnlyNodesThePodMayRunOn: where the scheduler replay
// refuses a pod's way on one node (x, taken first by the scheduler and open
// to both 1g devices, would take the 1g.10gb+me made for y on n1), the same
// way on the next GPU of its class is tried only on a node the pod may run
// on: y, which may run on n1 only, is not planned on n2.
func TestReplayRefusalTriesOnlyNodesThePodMayRunOn(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{
			node("n1").policy(Policy{MaxGPUsPerNode: 2}).
				gpu("A100-SXM4-80GB", "1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
				gpu("A100-SXM4-80GB", "", "").build(),
			node("n2").policy(Policy{MaxGPUsPerNode: 2}).gpu("A100-SXM4-80GB", "", "").build(),
		},
		Pending: []Pod{
			pod("x", 2).claim("device.attributes['mig.miglayout.io'].memory < 10000", 1).build(),
			pod("y", 1).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("1g.10gb+me"), 1).build(),
		}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Served {
		if s.Pod == "default/y" && s.Node != "n1" {
			t.Errorf("pod y planned on %s, where it may not run\nplan: %+v", s.Node, toTrace(res))
		}
	}
	if diff := cmp.Diff([]string{"default/x"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
}

// TestPlacementKeptOnANodeThePodMayRunOn: a large pod nothing serves now
// keeps a placement only on a node it may run on, not on the first GPU in
// the same state elsewhere.
func TestPlacementKeptOnANodeThePodMayRunOn(t *testing.T) {
	// The 1g.10gb in use keeps the only 4g.40gb placement from being made.
	nodes := []Node{
		node("other").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
		node("mine").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
	}
	pods := []Pod{pod("big", 1).nodeSelector("kubernetes.io/hostname", "mine").claim(profileIs("4g.40gb"), 1).build()}
	got := planTrace(t, nodes, pods)
	if diff := cmp.Diff(map[string]string{"default/big": "mine/gpu-0 4g.40gb@0"}, got.Kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s\nplan: %+v", diff, got)
	}
	for _, s := range got.Served {
		if strings.HasPrefix(s, "default/big ") {
			t.Errorf("pod big served: %s", s)
		}
	}
}

// TestReplayRefusalTriesTheSameWayOnFurtherNodes: where the scheduler
// replay refuses a pod's way on one node and then on the next GPU of its
// class on another node, the way is tried on a further node (up to eight),
// where no pod planned before it takes the device made for it.
func TestReplayRefusalTriesTheSameWayOnFurtherNodes(t *testing.T) {
	busy := func(name string) Node {
		return node(name).policy(Policy{MaxGPUsPerNode: 2}).
			gpu("A100-SXM4-80GB", "1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
			gpu("A100-SXM4-80GB", "", "").build()
	}
	// x1 and x2, taken first by the scheduler and open to both 1g
	// devices, would take the 1g.10gb+me made for y on n1 and n2.
	x := func(name, on string) Pod {
		return pod(name, 2).nodeSelector("kubernetes.io/hostname", on).claim("device.attributes['mig.miglayout.io'].memory < 10000", 1).build()
	}
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes:   []Node{busy("n1"), busy("n2"), node("n3").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{x("x1", "n1"), x("x2", "n2"), pod("y", 1).claim(profileIs("1g.10gb+me"), 1).build()}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"default/x1": "n1", "default/x2": "n2", "default/y": "n3"}, servedNodes(res)); diff != "" {
		t.Errorf("nodes of the pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
}
