package planner

import "testing"

// A pod whose profile only a node's policy forbids, where the other node
// it may run on has no policy but GPUs without the profile, can never be
// served: it is told which policy keeps it out, not that it waits for room.
func TestPodNoNodeMayEverServeIsToldThePolicy(t *testing.T) {
	nodes := []Node{
		node("a30").gpu("A30", "", "").build(),
		node("a100").policy(Policy{AllowedProfiles: []string{"2g.20gb"}}).gpu("A100-SXM4-80GB", "", "").build(),
	}
	pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb"), 1).build()}
	got := planTrace(t, nodes, pods)
	want := "claim p-gpu is satisfied by 1g.10gb, which the Auto policy (allowedProfiles) of no node the pod may run on allows"
	if why := got.Unservable["default/p"]; why != want {
		t.Errorf("pod p: unservable %q, want %q", why, want)
	}
}
