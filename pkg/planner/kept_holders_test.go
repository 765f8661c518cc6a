package planner

import (
	"testing"
)

// TestWhereAPlacementIsKept: a placement is kept for a pod of a large profile
// on a GPU no other waiting pod holds, of a node whose policy allows the
// profile (else the pod would wait for a device never made); a pod that
// shares the kept pod's claim but may not run on that node is told why
// rather than kept there.
func TestWhereAPlacementIsKept(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"two large pods, one GPU: the second is kept nowhere": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build()},
			pods:  []Pod{pod("big1", 2).claim(profileIs("7g.80gb"), 1).build(), pod("big2", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{
				Kept:       map[string]string{"default/big1": "n1/gpu-0 7g.80gb@0"},
				Unservable: map[string]string{"default/big2": NoRoom},
			},
		},
		"not on a node whose policy forbids the profile, though fewer devices are in its way there": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "1g.10gb@5,1g.10gb@6", "1g.10gb@5,1g.10gb@6").build(),
				node("n2").policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build(),
			},
			pods: []Pod{pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{Kept: map[string]string{"default/big": "n1/gpu-0 7g.80gb@0"}},
		},
		"a pod sharing the kept pod's claim that may not run on its node": {
			nodes: []Node{
				node("n1").label("zone", "a").gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build(),
				node("n2").label("zone", "b").gpu("A100-SXM4-80GB", "1g.10gb@5,1g.10gb@6", "1g.10gb@5,1g.10gb@6").build(),
			},
			pods: []Pod{pod("a", 2).sharedClaim("shared", profileIs("7g.80gb")).build(),
				pod("b", 1).nodeSelector("zone", "b").sharedClaim("shared", profileIs("7g.80gb")).build()},
			want: trace{
				Kept: map[string]string{"default/a": "n1/gpu-0 7g.80gb@0"},
				Unservable: map[string]string{"default/b": "the pod shares claims with pod default/a, which waits for a placement kept on node n1, " +
					"where this pod may not run (node selector, affinity, tolerations, claims allocated already, or kube-scheduler did not bind it there)"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}
