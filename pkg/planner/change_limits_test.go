package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestPodAboveChangeLimits: a pod of two 4g.40gb on a node of two whole
// A100s needs both GPUs changed; where the policy lets one plan change only
// one GPU of the node (or of its group), nothing is changed for it and it
// hears that the limit, not room, is what keeps it waiting.
func TestPodAboveChangeLimits(t *testing.T) {
	tests := map[string]struct {
		policy   Policy
		groupMax map[string]int
		want     trace
	}{
		"one GPU of the node at once": {
			policy: Policy{MaxGPUsPerNode: 1},
			want:   trace{Unservable: map[string]string{"default/pair": ExceedsChangeLimits}},
		},
		"two GPUs of the node, one of the group": {
			policy: Policy{MaxGPUsPerNode: 2, Group: "g"}, groupMax: map[string]int{"g": 1},
			want: trace{Unservable: map[string]string{"default/pair": ExceedsChangeLimits}},
		},
		"two GPUs at once": {
			policy: Policy{MaxGPUsPerNode: 2},
			want: trace{
				Changes:    []string{"n1/0: 7g.80gb@0 -> 4g.40gb@0 serves default/pair", "n1/1: 7g.80gb@0 -> 4g.40gb@0 serves default/pair"},
				Served:     []string{"default/pair -> n1 gpu-0-mig-4g40gb-5-0, gpu-1-mig-4g40gb-5-0 after change"},
				Unservable: map[string]string{},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, GroupMaxGPUs: tc.groupMax,
				Nodes:   []Node{node("n1").policy(tc.policy).gpu("A100-SXM4-80GB", "7g.80gb@0", "").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
				Pending: []Pod{pod("pair", 2).claim(profileIs("4g.40gb"), 2).build()}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangeLimitsJudgedPerNodePolicy: two nodes alike but for their limit
// on GPUs changed at once are not judged as one kind: where only the node
// that allows one GPU at a time could take the pod of two 4g.40gb (the
// other's GPUs are in use), the pod hears that the limit keeps it waiting;
// where the node that allows two could, with its GPUs free, it waits for
// room.
func TestChangeLimitsJudgedPerNodePolicy(t *testing.T) {
	busy := func(n *nodeB) *nodeB {
		return n.gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0")
	}
	tests := map[string]struct {
		nodes []Node
		want  string
	}{
		"a node allowing two after one allowing one": {
			nodes: []Node{busy(node("one").policy(Policy{MaxGPUsPerNode: 1})).build(),
				busy(node("two").policy(Policy{MaxGPUsPerNode: 2})).build()},
			want: NoRoom,
		},
		"only nodes allowing one": {
			nodes: []Node{busy(node("one-a").policy(Policy{MaxGPUsPerNode: 1})).build(),
				busy(node("one-b").policy(Policy{MaxGPUsPerNode: 1})).build()},
			want: ExceedsChangeLimits,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: tc.nodes,
				Pending: []Pod{pod("pair", 2).claim(profileIs("4g.40gb"), 2).build()}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Unservable["default/pair"]; got != tc.want {
				t.Errorf("pod told %q, want %q", got, tc.want)
			}
		})
	}
}
