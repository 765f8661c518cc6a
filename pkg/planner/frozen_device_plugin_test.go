package planner

import "testing"

// TestFrozenNodeOfTheDevicePluginIsNoWait: a pod whose DeviceClass-backed
// extended resource a Frozen node's device plugin serves is not told it
// waits for that node's agent (kube-scheduler leaves the resource to the
// plugin there: no MIG device made on that node places it), even where a
// pod of the same claims was found to fit on a node of that kind, as
// fitsWhenFree caches by kind of node and claims.
func TestFrozenNodeOfTheDevicePluginIsNoWait(t *testing.T) {
	nodes := []Node{
		withPluginGPUs(node("a-plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").frozenBy("its agent is lost").build(), "8"),
		withPluginGPUs(node("b-tainted").taint("team").gpu("A100-SXM4-80GB", "7g.80gb@0", "").frozenBy("its agent is lost").build(), "0"),
	}
	// plain, older, may run on both nodes and fits on a-plugin once free.
	plain := pod("plain", 2).tolerates("team").claim(profileIs("1g.10gb"), 1).build()
	ext := asExtendedResource(pod("ext", 1).claim(profileIs("1g.10gb"), 1).build())
	got := planTrace(t, nodes, []Pod{plain, ext})
	if why := got.Unservable["default/plain"]; why != WaitsForLostNode {
		t.Fatalf("pod plain: unservable %q, want %q", why, WaitsForLostNode)
	}
	if why := got.Unservable["default/ext"]; why == "" || why == WaitsForLostNode {
		t.Errorf("pod whose extended resource only a Frozen node's device plugin serves: unservable %q, want a reason other than %q", why, WaitsForLostNode)
	}
}
