package planner

import "testing"

// TestChangeInFlightForPodsSharingAClaimOfTwoDevices: pods sharing one
// claim of two devices, named by the change in flight that brings them,
// are all served with the devices the first of them gets: the claim is
// allocated once.
func TestChangeInFlightForPodsSharingAClaimOfTwoDevices(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "").changingFor("default/a", "default/b").build()}
	a := pod("a", 2).sharedClaim("shared", profileIs("1g.10gb")).build()
	a.Claims[0].Spec.Devices.Requests[0].Exactly.Count = 2
	b := pod("b", 1).build()
	b.Claims = a.Claims
	want := trace{Served: []string{
		"default/a -> n1 gpu-0-mig-1g10gb-19-0, gpu-0-mig-1g10gb-19-1",
		"default/b -> n1 gpu-0-mig-1g10gb-19-0, gpu-0-mig-1g10gb-19-1",
	}}
	checkTrace(t, want, planTrace(t, nodes, []Pod{a, b}))
}
