package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestWaitingPodsTakeTheirTurn: kube-scheduler tries every pending pod in
// its order, those the plan leaves waiting too. A waiting pod taken before
// a pod the plan serves on the node gets the devices it accepts first, so
// the plan must not promise those devices to the younger pod: every pod
// it serves is allocated when the pending pods, served or not, are
// replayed in the scheduler's order.
func TestWaitingPodsTakeTheirTurn(t *testing.T) {
	tests := map[string]struct {
		pending []Pod
		// wantWaiting is the pod left waiting, and why.
		wantWaiting, why string
	}{
		// The oldest pod asks for every 1g.10gb of the node; the node
		// serves the 3g.40gb pod, so it waits (WaitsForAllModeNode). A
		// 1g.10gb made for the youngest pod would be the oldest one's.
		"an All-mode pod whose node serves another": {
			pending: []Pod{
				pod("all", 10).claim(profileIs("1g.10gb"), 0).allDevices().build(),
				pod("big", 5).claim(profileIs("3g.40gb"), 1).build(),
				pod("small", 1).claim(profileIs("1g.10gb"), 1).build(),
			},
			wantWaiting: "default/all", why: WaitsForAllModeNode,
		},
		// waiter shares host's claim and has a 1g.10gb claim of its own:
		// it waits for host's allocation (WaitsForSharedClaim), then
		// kube-scheduler allocates its own claim on host's node, before
		// the younger x.
		"a pod waiting for a claim it shares": {
			pending: []Pod{
				pod("host", 20).priority(10).sharedClaim("c", profileIs("3g.40gb")).build(),
				pod("waiter", 10).sharedClaim("c", profileIs("3g.40gb")).claim(profileIs("1g.10gb"), 1).build(),
				pod("x", 1).claim(profileIs("1g.10gb"), 1).build(),
			},
			wantWaiting: "default/waiter", why: WaitsForSharedClaim,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}, Pending: tc.pending}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Unservable[tc.wantWaiting]; got != tc.why {
				t.Errorf("%s unservable %q, want %q", tc.wantWaiting, got, tc.why)
			}
			if failed := replayPending(t, snap, res, false, true); len(failed) > 0 {
				t.Errorf("served by the plan %v, but kube-scheduler, taking the waiting pods in their turn too, does not allocate %v", servedPods(res), failed)
			}
		})
	}
}

// TestWaitingPodsTakeNothingAfterTheirTurn: a waiting pod younger than
// the pods the plan serves on the node is tried after them, so it takes
// nothing made for them: the plan serves them as without it.
func TestWaitingPodsTakeNothingAfterTheirTurn(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{
			pod("big", 10).claim(profileIs("3g.40gb"), 1).build(),
			pod("small", 5).claim(profileIs("1g.10gb"), 1).build(),
			pod("all", 1).claim(profileIs("1g.10gb"), 0).allDevices().build(),
		}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/big", "default/small"}, sets.List(sets.New(servedPods(res)...))); diff != "" {
		t.Errorf("served (-want +got):\n%s\nunservable %v", diff, res.Unservable)
	}
	if failed := replayPending(t, snap, res, false, true); len(failed) > 0 {
		t.Errorf("kube-scheduler does not allocate %v", failed)
	}
}

// TestWaiterOnManyNodesLeavesOtherNodes: an All-mode pod that may run on
// ten nodes (w=yes) waits on each (every one serves a 4g.40gb pod), and
// there takes the 1g.10gb a younger pod would be given. The younger pod,
// which may run anywhere, is served on a node where the All-mode pod may
// not run: a refusal on a node with waiting pods says nothing of the
// class's nodes without any, so it does not count toward the few nodes a
// refused way is tried on.
func TestWaiterOnManyNodesLeavesOtherNodes(t *testing.T) {
	var nodes []Node
	var pending []Pod
	for i := range 12 {
		w := "yes"
		if i >= 10 {
			w = "no"
		}
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name).label("w", w).gpu("A100-SXM4-80GB", "", "").build())
		pending = append(pending, pod("big"+name, 100).priority(10).nodeSelector("kubernetes.io/hostname", name).claim(profileIs("4g.40gb"), 1).build())
	}
	pending = append(pending,
		pod("all", 50).priority(5).nodeSelector("w", "yes").claim(profileIs("1g.10gb"), 0).allDevices().build(),
		pod("small", 1).priority(1).claim(profileIs("1g.10gb"), 1).build())
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0, Nodes: nodes, Pending: pending}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Unservable["default/all"]; got != WaitsForAllModeNode {
		t.Fatalf("default/all unservable %q, want %q", got, WaitsForAllModeNode)
	}
	if n := servedNodes(res)["default/small"]; n != "n10" && n != "n11" {
		t.Errorf("default/small served on %q (unservable %q); want n10 or n11, where the All-mode pod may not run", n, res.Unservable["default/small"])
	}
	if failed := replayPending(t, snap, res, false, true); len(failed) > 0 {
		t.Errorf("kube-scheduler does not allocate %v", failed)
	}
}
