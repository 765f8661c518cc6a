package planner

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

// TestReclaimIdleGPUs: a GPU idle for the policy's ReclaimIdleAfter is
// given back as one device of its largest profile, once every pending pod
// is planned and only where nothing holds it; otherwise it is left as it
// is.
func TestReclaimIdleGPUs(t *testing.T) {
	reclaim := Policy{ReclaimIdleAfter: 5 * time.Minute}
	const fragments = "1g.10gb@0,2g.20gb@2,3g.40gb@4"
	const whole = "n1/0: " + fragments + " -> 7g.80gb@0"
	tests := map[string]struct {
		node *nodeB
		pods []Pod
		want trace
	}{
		"idle long enough": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").idleFor(6 * time.Minute),
			want: trace{Changes: []string{whole}},
		},
		"an empty GPU in MIG mode": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", "", "").idleFor(6 * time.Minute),
			want: trace{Changes: []string{"n1/0: (empty) -> 7g.80gb@0"}},
		},
		"idle, not long enough": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").idleFor(4 * time.Minute),
		},
		"not idle": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, ""),
		},
		"whole already": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", "7g.80gb@0", "").idleFor(time.Hour),
		},
		"policy off": {
			node: node("n1").gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
		},
		// A GPU whose free devices are the node's spares keeps them...
		"the node keeps its spares there": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}).
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
		},
		// ... another GPU's do not need to stay.
		"the node keeps its spares on another GPU": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}).
				gpu("A100-SXM4-80GB", "1g.10gb@6,3g.40gb@0", "3g.40gb@0").
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
			want: trace{Changes: []string{"n1/1: " + fragments + " -> 7g.80gb@0"}},
		},
		// A spare the node cannot hold (a profile another model offers,
		// in a MigLayout over several) costs the idle GPU nothing.
		"spares of a profile the model does not offer": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}).
				gpu("H200-SXM5-141GB", "1g.18gb@0,2g.35gb@2,3g.71gb@4", "").idleFor(time.Hour),
			want: trace{Changes: []string{"n1/0: 1g.18gb@0,2g.35gb@2,3g.71gb@4 -> 7g.141gb@0"},
				MissingSpares: map[string]int{"n1 1g.10gb": 1}},
		},
		// Nor one it holds no free device of, where no other GPU holds it
		// either.
		"spares none of the node's GPUs holds": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"2g.20gb": 2}}).
				gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4").
				gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4", "").idleFor(time.Hour),
			want: trace{Changes: []string{"n1/1: 1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4 -> 7g.80gb@0"},
				MissingSpares: map[string]int{"n1 2g.20gb": 2}},
		},
		// Given back whole, the GPU is the spare the node lacks.
		"the whole device is the spare": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"7g.80gb": 1}}).
				gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4").
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
			want: trace{Changes: []string{"n1/1: " + fragments + " -> 7g.80gb@0"}},
		},
		// Its free devices are spares the node lacks already (no room
		// for a third): giving them back would leave it fewer still.
		"the node lacks spares the GPU holds some of": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 3}}).
				gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4").
				gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", "").idleFor(time.Hour),
			want: trace{MissingSpares: map[string]int{"n1 1g.10gb": 1}},
		},
		"the policy does not allow the largest profile": {
			node: node("n1").policy(Policy{ReclaimIdleAfter: time.Minute, AllowedProfiles: []string{"1g.10gb", "3g.40gb"}}).
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
		},
		"a DeviceTaintRule names the whole device": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").tainted("7g.80gb@0").idleFor(time.Hour),
		},
		"frozen": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour).frozen(),
		},
		// A pending pod is planned first: the GPU serves it, not a reclaim.
		"a pending pod is served there": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
			pods: []Pod{pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: " + fragments + " -> 1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
		// The limit of one GPU changed at once per node: the GPU the pod
		// needs changes, the idle one waits for a later plan.
		"the node's limit is taken by a pod's change": {
			node: node("n1").policy(reclaim).
				gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour),
			pods: []Pod{pod("half", 1).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 3g.40gb@4 -> 4g.40gb@0,3g.40gb@4 serves default/half"},
				Served:  []string{"default/half -> n1 gpu-0-mig-4g40gb-5-0 after change"},
			},
		},
		// A reclaim in flight that has destroyed nothing yet
		// (Reclaiming) is planned again where the plan leaves the GPU
		// alone, however recently the GPU was first seen idle (a
		// restarted controller may count afresh)...
		"being given back, nothing pending": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").reclaiming(),
			want: trace{Changes: []string{whole}},
		},
		// ... but a pod that arrives meanwhile gets the GPU's free
		// device as it is: the caller cancels the reclaim (rather than
		// making a 7g.80gb and splitting it again).
		"being given back, a pod takes a free device": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", "").reclaiming(),
			pods: []Pod{pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{Served: []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6"}},
		},
		// ... or a change made from the layout it has.
		"being given back, a pod's change comes instead": {
			node: node("n1").policy(reclaim).gpu("A100-SXM4-80GB", fragments, "").reclaiming(),
			pods: []Pod{pod("half", 1).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: " + fragments + " -> 4g.40gb@0,3g.40gb@4 serves default/half"},
				Served:  []string{"default/half -> n1 gpu-0-mig-4g40gb-5-0 after change"},
			},
		},
		// A GPU that falls due does not take the node's one slot from
		// one already being given back (whichever comes first).
		"being given back, another GPU falls due": {
			node: node("n1").policy(reclaim).
				gpu("A100-SXM4-80GB", fragments, "").idleFor(time.Hour).
				gpu("A100-SXM4-80GB", fragments, "").reclaiming(),
			want: trace{Changes: []string{"n1/1: " + fragments + " -> 7g.80gb@0"}},
		},
		// A pod's change on another GPU of the node takes the node's
		// one slot first.
		"being given back, the node's limit is taken by a pod's change": {
			node: node("n1").policy(reclaim).
				gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").
				gpu("A100-SXM4-80GB", fragments, "").reclaiming(),
			pods: []Pod{pod("half", 1).claim(profileIs("4g.40gb"), 1).build()},
			want: trace{
				Changes: []string{"n1/0: 3g.40gb@4 -> 4g.40gb@0,3g.40gb@4 serves default/half"},
				Served:  []string{"default/half -> n1 gpu-0-mig-4g40gb-5-0 after change"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, []Node{tc.node.build()}, tc.pods))
		})
	}
}

// TestReclaimIdleGPUReason: the change that gives an idle GPU back whole
// says why, for the NodeMigLayout and the events.
func TestReclaimIdleGPUReason(t *testing.T) {
	n := node("n1").policy(Policy{ReclaimIdleAfter: 5 * time.Minute}).gpu("A100-SXM4-80GB", "1g.10gb@0", "").idleFor(time.Hour).build()
	res, err := Plan(t.Context(), Snapshot{Driver: driver, Nodes: []Node{n}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Reason != "gives the GPU, idle for 5m0s, back whole" || len(res.Changes[0].Serves) != 0 || !res.Changes[0].Reclaims {
		t.Errorf("changes %+v; want one, for no pod, saying the idle GPU is given back whole", res.Changes)
	}
}
