package planner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestNoPlanOnAGPUChanging: a GPU whose change is in flight is left alone,
// even where it counts toward no limit (a change the agent retries): no
// spare is planned there, and a pod whose claim reads a per-GPU attribute
// gets no device made there.
func TestNoPlanOnAGPUChanging(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"a spare is not made on a GPU whose change is retried": {
			nodes: []Node{node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).
				gpu("A100-SXM4-80GB", "3g.40gb@4", "").retrying().build()},
			want: trace{MissingSpares: map[string]int{"n1 1g.10gb": 1}},
		},
		"a spare is not made on a GPU whose change is in flight, on a node that may change two": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2, Spares: map[string]int{"1g.10gb": 1}}).
				gpu("A100-SXM4-80GB", "3g.40gb@4", "").changing().build()},
			want: trace{MissingSpares: map[string]int{"n1 1g.10gb": 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}

// TestReclaimLeavesHeldDevices: a GPU being given back (Reclaiming) that
// has gained a device held since, by claims with admin access only
// (GPU.Shared), is not given back whole: that would destroy the device.
// A GPU idle for exactly the policy's ReclaimIdleAfter is due.
func TestReclaimLeavesHeldDevices(t *testing.T) {
	reclaim := Policy{ReclaimIdleAfter: 5 * time.Minute}
	const fragments = "1g.10gb@0,2g.20gb@2,3g.40gb@4"
	tests := map[string]struct {
		node *nodeB
		want trace
	}{
		"being given back, a device shared since": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").shared("1g.10gb@0").reclaiming(),
		},
		"idle, a device shared": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").shared("2g.20gb@2").idleFor(time.Hour),
		},
		"being given back, a device pinned since": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "3g.40gb@4").reclaiming(),
		},
		"idle for exactly ReclaimIdleAfter": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").idleFor(5 * time.Minute),
			want: trace{Changes: []string{"n1/0: " + fragments + " -> 7g.80gb@0"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, []Node{tc.node.build()}, nil))
		})
	}
}

// TestReclaimKeepsSparesCountsFreeDevicesOnly: a device in use on another GPU
// is no spare: giving the GPU back whole would leave the node without one;
// a GPU that holds none of a spare's profile, or that becomes the spare
// once whole, costs none.
func TestReclaimKeepsSparesCountsFreeDevicesOnly(t *testing.T) {
	spares := Policy{Spares: map[string]int{"1g.10gb": 1}}
	tests := map[string]struct {
		node *nodeB
		want bool
	}{
		"the other GPU's spare is in use": {
			node: node("n1").policy(spares).gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").gpu("A100-SXM4-80GB", "1g.10gb@0", ""),
			want: false,
		},
		"the other GPU has a free one": {
			node: node("n1").policy(spares).gpu("A100-SXM4-80GB", "1g.10gb@6", "").gpu("A100-SXM4-80GB", "1g.10gb@0", ""),
			want: true,
		},
		"only this GPU has one": {
			node: node("n1").policy(spares).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "1g.10gb@0", ""),
			want: false,
		},
		"no spares kept": {
			node: node("n1").gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "1g.10gb@0", ""),
			want: true,
		},
		"a spare this GPU holds none of": {
			node: node("n1").policy(spares).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "2g.20gb@0", ""),
			want: true,
		},
		"the whole device is the spare": {
			node: node("n1").policy(Policy{Spares: map[string]int{"7g.80gb": 1}}).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "3g.40gb@0", ""),
			want: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ReclaimKeepsSpares(tc.node.build(), 1); got != tc.want {
				t.Errorf("ReclaimKeepsSpares(n1, 1) = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestAddSharedClaimKeptIsNotServedByAChangeInFlight: a pod added to a
// plan whose claim is shared with a pod that waits with a placement kept
// for it waits on that placement too, even where a change in flight names
// it: one claim is allocated once, so it is not planned on two devices.
func TestAddSharedClaimKeptIsNotServedByAChangeInFlight(t *testing.T) {
	const expr = "device.attributes['mig.miglayout.io'].profile == '7g.80gb'"
	nodes := []Node{
		node("n1").label("zone", "a").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
		node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").changingFor("default/b").build(),
	}
	a := pod("a", 2).nodeSelector("zone", "a").sharedClaim("c", expr).build()
	b := pod("b", 1).sharedClaim("c", expr).build()
	snap := Snapshot{Driver: driver, Nodes: nodes, Pending: []Pod{a}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got := toTrace(pl.Result())
	want := trace{Kept: map[string]string{"default/a": "n1/gpu-0 7g.80gb@0", "default/b": "n1/gpu-0 7g.80gb@0"}}
	checkTrace(t, want, got)
}

// TestPerGPUClaimKeepsLimitsAndPolicy: a claim that names a GPU (judged on
// each GPU's own devices, servePinned) changes no GPU past the node's limit
// on GPUs changed at once, none whose change is in flight, and makes no
// device of a profile the node's policy does not allow.
func TestPerGPUClaimKeepsLimitsAndPolicy(t *testing.T) {
	gpu1 := func(prof string) string {
		return profileIs(prof) + " && device.attributes['mig.miglayout.io'].parentIndex == 1"
	}
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"the node's one GPU changing at once is taken by another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{
				pod("first", 2).claim(profileIs("7g.80gb"), 1).build(),
				pod("gpu1", 1).claim(gpu1("3g.40gb"), 1).build(),
			},
			want: trace{
				Changes:    []string{"n1/0: (empty) -> 7g.80gb@0 serves default/first"},
				Served:     []string{"default/first -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Unservable: map[string]string{"default/gpu1": NoRoom},
			},
		},
		"the GPU's change is in flight": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").retrying().build()},
			pods:  []Pod{pod("gpu1", 1).claim(gpu1("3g.40gb"), 1).build()},
			want:  trace{Unservable: map[string]string{"default/gpu1": NoRoom}},
		},
		"the policy does not allow the profile": {
			nodes: []Node{node("n1").policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build()},
			pods:  []Pod{pod("gpu1", 1).claim(gpu1("3g.40gb"), 1).build()},
			want:  trace{Unservable: map[string]string{"default/gpu1": "no GPU of the Auto nodes the pod may use has a device claim gpu1-gpu accepts"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}

// TestDevicesInUseAreNotFree: a device pinned (allocated, prepared,
// running a process) is no free device: a claim that names the GPU does
// not get it, and it counts as no spare.
func TestDevicesInUseAreNotFree(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"a claim for a GPU by index whose devices are all in use waits": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4").build()},
			pods:  []Pod{pod("gpu1", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 1", 1).build()},
			want:  trace{Unservable: map[string]string{"default/gpu1": NoRoom}},
		},
		"a device in use is no spare": {
			nodes: []Node{node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build()},
			want:  trace{Changes: []string{"n1/1: 1g.10gb@6 -> 1g.10gb@4,1g.10gb@6 keeps spare 1g.10gb"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}

// TestPodSharingClaimsWithTwoServedPodsWaits: a pod whose claims two pods
// served in this plan hold, one claim each, is no sharer of either (the
// devices of one do not allocate the other's claim): it waits for the
// shared claims' allocations, even where it has as many claims as one of
// them.
func TestPodSharingClaimsWithTwoServedPodsWaits(t *testing.T) {
	one := profileIs("1g.10gb")
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", "").build()}
	pods := []Pod{
		pod("a", 3).priority(10).sharedClaim("c1", one).sharedClaim("c2", one).build(),
		pod("b", 2).priority(10).sharedClaim("c3", one).build(),
		pod("c", 1).sharedClaim("c1", one).sharedClaim("c3", one).build(),
	}
	got := planTrace(t, nodes, pods)
	if why := got.Unservable["default/c"]; why != WaitsForSharedClaim {
		t.Errorf("pod c: unservable %q, want %q; served %v", why, WaitsForSharedClaim, got.Served)
	}
	for _, s := range got.Served {
		if strings.HasPrefix(s, "default/c ") {
			t.Errorf("pod c served: %s", s)
		}
	}
}

// TestCountsAgreeLeavesPinnedDevices: the replay of kube-scheduler without
// the allocator (countsAgree) gives no pod a device in use, as the
// allocator does not, even where a claim with admin access holds it too
// (GPU.Shared and Pinned): one free 1g.10gb serves one of two pods that
// ask for one, not both.
func TestCountsAgreeLeavesPinnedDevices(t *testing.T) {
	tests := map[string]Node{
		"pinned":                 node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "1g.10gb@0").build(),
		"pinned and held shared": node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "1g.10gb@0").shared("1g.10gb@0").build(),
	}
	for name, n := range tests {
		t.Run(name, func(t *testing.T) {
			x := pod("x", 2).claim(profileIs("1g.10gb"), 1).build()
			y := pod("y", 1).claim(profileIs("1g.10gb"), 1).build()
			snap := Snapshot{Driver: driver, Nodes: []Node{n}, Pending: []Pod{x}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
			pl, err := NewPlanner(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			p := pl.p
			p.accepts["default/y"] = p.accepts["default/x"]
			if _, ok := p.accepts["default/x"]; !ok {
				t.Fatal("pod x: no profiles recorded")
			}
			agrees, ok := p.countsAgree(p.nodes[0], []Pod{x, y}, nil)
			if !ok || agrees {
				t.Errorf("countsAgree(x, y) = %t, %t; want false, true: the pinned 1g.10gb serves neither", agrees, ok)
			}
		})
	}
}

// TestSharerTakesRoomOnItsNode: a pod served with the devices of the pod
// that holds all its claims runs on that node too, so its requests count
// against the node's room: a pod planned after both that does not fit
// beside them waits for room.
func TestSharerTakesRoomOnItsNode(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").allocatableCPU("4").build()
	pods := []Pod{
		pod("host", 3).priority(10).sharedClaim("c", profileIs("1g.10gb")).requestsCPU("2").build(),
		pod("sharer", 2).priority(10).sharedClaim("c", profileIs("1g.10gb")).requestsCPU("2").build(),
		pod("late", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("2").build(),
	}
	got := planTrace(t, []Node{n}, pods)
	if why := got.Unservable["default/late"]; why != WaitsForNodeResources {
		t.Errorf("pod late: unservable %q, want %q; served %v", why, WaitsForNodeResources, got.Served)
	}
}

// TestNominatedPodKeepsItsRoom: a pod a preemption nominated to a node
// that the plan does not serve keeps its requests there, as kube-scheduler
// keeps them for it from pods of its priority or lower: a pod planned after
// it that does not fit beside it waits for room.
func TestNominatedPodKeepsItsRoom(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").allocatableCPU("4").build()
	nominated := pod("nominated", 2).priority(10).claim(profileIs("7g.80gb"), 1).requestsCPU("4").build()
	nominated.Pod.Status.NominatedNodeName = "n1"
	pods := []Pod{nominated, pod("late", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("2").build()}
	got := planTrace(t, []Node{n}, pods)
	if why := got.Unservable["default/late"]; why != WaitsForNodeResources {
		t.Errorf("pod late: unservable %q, want %q; served %v", why, WaitsForNodeResources, got.Served)
	}
}

// TestReplayRefusalKeepsChangeLimits: x (taken first by the scheduler,
// open to both 1g devices) and y (1g.10gb+me only) could share node n1,
// but the scheduler replay refuses y's way there (x would take the
// 1g.10gb+me made for y). The same way on the next GPU of its class, on
// n2, is not planned where n2 may change no more GPUs: a change is in
// flight there and the limit, of the node or of its group, is one.
func TestReplayRefusalKeepsChangeLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		policy Policy
		groups map[string]int
	}{
		"the node's limit":  {policy: Policy{MaxGPUsPerNode: 1}},
		"the group's limit": {policy: Policy{MaxGPUsPerNode: 2, Group: "g"}, groups: map[string]int{"g": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0, GroupMaxGPUs: tc.groups,
				Nodes: []Node{
					node("n1").policy(Policy{MaxGPUsPerNode: 2}).
						gpu("A100-SXM4-80GB", "1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
						gpu("A100-SXM4-80GB", "", "").build(),
					node("n2").policy(tc.policy).
						gpu("A100-SXM4-80GB", "", "").changing().
						gpu("A100-SXM4-80GB", "", "").build(),
				},
				Pending: []Pod{
					pod("x", 2).claim("device.attributes['mig.miglayout.io'].memory < 10000", 1).build(),
					pod("y", 1).claim(profileIs("1g.10gb+me"), 1).build(),
				}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Changes {
				if c.Node == "n2" {
					t.Errorf("GPU %d of n2 changes (%s -> %s) beside the change in flight; the limit is one\nplan: %+v", c.GPU, c.From, c.To, toTrace(res))
				}
			}
			if diff := cmp.Diff([]string{"default/x"}, servedPods(res)); diff != "" {
				t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
			}
		})
	}
}
