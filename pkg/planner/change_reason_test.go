package planner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestChangeReasonNamesFivePods: a change's reason names the pods it
// serves, the first five of them and how many more.
func TestChangeReasonNamesFivePods(t *testing.T) {
	pods := func(n int) []Pod {
		var out []Pod
		for i := range n {
			out = append(out, pod("p"+itoa(i), 10-i).claim(profileIs("1g.10gb"), 1).build())
		}
		return out
	}
	tests := map[string]struct {
		pods []Pod
		want string
	}{
		"five pods": {
			pods: pods(5),
			want: "serves 5 pending pod(s): default/p0, default/p1, default/p2, default/p3, default/p4",
		},
		"six pods": {
			pods: pods(6),
			want: "serves 6 pending pod(s): default/p0, default/p1, default/p2, default/p3, default/p4, and 1 more",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}, Pending: tc.pods, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changes) != 1 {
				t.Fatalf("want one change, got %+v", toTrace(res))
			}
			if diff := cmp.Diff(tc.want, res.Changes[0].Reason); diff != "" {
				t.Errorf("reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReclaimedGPUServingAnAddedPodIsNoReclaim: a GPU the plan gives back
// whole that a pod added to the plan then takes is changed to serve that
// pod: the change says so, not that it gives an idle GPU back.
func TestReclaimedGPUServingAnAddedPodIsNoReclaim(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{ReclaimIdleAfter: 5 * time.Minute}).gpu("A100-SXM4-80GB", "1g.10gb@0,2g.20gb@2,3g.40gb@4", "").idleFor(time.Hour).build()}
	snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(context.Background(), pod("p", 1).claim(profileIs("7g.80gb"), 1).build()); err != nil {
		t.Fatal(err)
	}
	res := pl.Result()
	type change struct {
		Serves   []string
		Reclaims bool
		Reason   string
	}
	var got []change
	for _, c := range res.Changes {
		got = append(got, change{Serves: c.Serves, Reclaims: c.Reclaims, Reason: c.Reason})
	}
	want := []change{{Serves: []string{"default/p"}, Reason: "serves 1 pending pod(s): default/p"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}
