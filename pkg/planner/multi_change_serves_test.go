package planner

import "testing"

// TestChangeServesOnlyPodsThatNeedIt: a pod of several devices served by
// devices that exist is not among the pods a later change of the same GPU
// serves: only the pod whose device the change makes is.
func TestChangeServesOnlyPodsThatNeedIt(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,3g.40gb@4", "").build()}
	pods := []Pod{
		pod("m", 2).sharedClaim("m-large", profileIs("3g.40gb")).sharedClaim("m-small", profileIs("1g.10gb")).build(),
		pod("p", 1).claim(profileIs("1g.10gb"), 1).build(),
	}
	got := planTrace(t, nodes, pods)
	if len(got.Changes) != 1 || got.Changes[0] != "n1/0: 1g.10gb@0,3g.40gb@4 -> 1g.10gb@0,1g.10gb@1,3g.40gb@4 serves default/p" {
		t.Errorf("changes %q, want the one change to serve default/p only\nplan: %+v", got.Changes, got)
	}
}
