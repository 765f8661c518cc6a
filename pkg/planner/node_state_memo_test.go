package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestPodOfSeveralDevicesTriesNodesInAnotherState: a pod of several
// devices that no node in one state can serve is still tried on a node in
// another state: GPUs of other layouts, other devices in use on a change
// in flight, or another group's limit on GPUs changed at once.
func TestPodOfSeveralDevicesTriesNodesInAnotherState(t *testing.T) {
	pair := func() *podB { return pod("pair", 1).claim(profileIs("1g.10gb"), 2) }
	tests := map[string]struct {
		nodes    []Node
		pods     []Pod
		groupMax map[string]int
		want     string // the node pair is served on
	}{
		"the first node's GPU is in use": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
				node("n2").gpu("A100-SXM4-80GB", "", "").build(),
			},
			pods: []Pod{pair().build()},
			want: "n2",
		},
		"the devices a change in flight brings are in use on the first node": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "1g.10gb@0,1g.10gb@1").changing().build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "").changing().build(),
			},
			pods: []Pod{pair().build()},
			want: "n2",
		},
		"the first node's group may change no more GPUs": {
			nodes: []Node{
				node("n0").policy(Policy{Group: "a"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("n1").policy(Policy{Group: "a"}).gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").policy(Policy{Group: "b"}).gpu("A100-SXM4-80GB", "", "").build(),
			},
			// big changes n0's GPU, which is all group a may change.
			pods:     []Pod{pod("big", 2).nodeSelector("kubernetes.io/hostname", "n0").claim(profileIs("7g.80gb"), 1).build(), pair().build()},
			groupMax: map[string]int{"a": 1, "b": 1},
			want:     "n2",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: tc.pods, GroupMaxGPUs: tc.groupMax, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, s := range res.Served {
				if s.Pod == "default/pair" {
					got = s.Node
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("node of pod pair (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
			}
		})
	}
}

// TestAllModePodWaitsForANodeAPodOfSeveralDevicesIsPlannedOn: a pod with a
// request for every matching device gets no node the plan serves a pod of
// several devices on.
func TestAllModePodWaitsForANodeAPodOfSeveralDevicesIsPlannedOn(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}
	pods := []Pod{
		pod("pair", 2).claim(profileIs("1g.10gb"), 2).build(),
		pod("all", 1).claim(profileIs("1g.10gb"), 1).allDevices().build(),
	}
	got := planTrace(t, nodes, pods)
	if diff := cmp.Diff(map[string]string{"default/all": WaitsForAllModeNode}, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s\nplan: %+v", diff, got)
	}
}
