package planner

import "testing"

// TestKeptPlacementIsOfThePreferredProfile: a pod open to several large
// profiles that nothing serves now keeps a placement of its preferred
// (smallest) profile, and the plan says which.
func TestKeptPlacementIsOfThePreferredProfile(t *testing.T) {
	// The 1g.10gb in use keeps a 4g.40gb and a 7g.80gb from being made.
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()}
	pods := []Pod{pod("big", 1).claim("device.attributes['mig.miglayout.io'].profile in ['4g.40gb', '7g.80gb']", 1).build()}
	want := trace{Kept: map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"}}
	checkTrace(t, want, planTrace(t, nodes, pods))
}

// TestKeptPlacementCountsSharedDevicesInTheWay: devices held by claims
// with admin access only (GPU.Shared) must stay like pinned ones, so they
// count among the devices in the way of a placement kept for a waiting pod:
// the GPU with one pinned device there is kept, not the one with two
// shared.
func TestKeptPlacementCountsSharedDevicesInTheWay(t *testing.T) {
	nodes := []Node{node("n1").
		gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "").shared("1g.10gb@0,1g.10gb@1").
		gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()}
	pods := []Pod{pod("big", 1).claim(profileIs("4g.40gb"), 1).build()}
	want := trace{Kept: map[string]string{"default/big": "n1/gpu-1 4g.40gb@0"}}
	checkTrace(t, want, planTrace(t, nodes, pods))
}
