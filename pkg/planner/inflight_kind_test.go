package planner

import "testing"

// TestFreeDeviceInFlightOnAGPUTheClaimRefusesIsNotTaken: a free device a
// change in flight brings is not given to a pod whose claim refuses that
// GPU's kind (its brand), though the claim accepts the profile on another
// kind of GPU.
func TestFreeDeviceInFlightOnAGPUTheClaimRefusesIsNotTaken(t *testing.T) {
	nodes := []Node{
		node("nv").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
		node("other").gpu("A100-SXM4-80GB", "1g.10gb@6", "").brand("Other").changing().build(),
	}
	pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].brand == 'Nvidia'", 1).build()}
	want := trace{Unservable: map[string]string{"default/p": NoRoom}}
	checkTrace(t, want, planTrace(t, nodes, pods))
}
