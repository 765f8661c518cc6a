package planner

import "testing"

// TestDeviceThatMustStayOnAGPULikeAnotherStays: of two GPUs of one layout,
// the one whose device must stay (in use, or held by claims with admin
// access only) keeps it, even after a device was made for another pod on
// the GPU where it is free: the second large pod waits with a placement
// kept (where the first one's device ends), and no change destroys the
// device.
func TestDeviceThatMustStayOnAGPULikeAnotherStays(t *testing.T) {
	tests := map[string]*nodeB{
		"in use": node("n1").policy(Policy{MaxGPUsPerNode: 2}).
			gpu("A100-SXM4-80GB", "1g.10gb@0", "").
			gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0"),
		"held with admin access only": node("n1").policy(Policy{MaxGPUsPerNode: 2}).
			gpu("A100-SXM4-80GB", "1g.10gb@0", "").
			gpu("A100-SXM4-80GB", "1g.10gb@0", "").shared("1g.10gb@0"),
	}
	pods := []Pod{
		pod("first", 2).claim(profileIs("7g.80gb"), 1).build(),
		pod("second", 1).claim(profileIs("7g.80gb"), 1).build(),
	}
	want := trace{
		Changes: []string{"n1/0: 1g.10gb@0 -> 7g.80gb@0 serves default/first"},
		Served:  []string{"default/first -> n1 gpu-0-mig-7g80gb-0-0 after change"},
		Kept:    map[string]string{"default/second": "n1/gpu-0 7g.80gb@0"},
	}
	for name, n := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, want, planTrace(t, []Node{n.build()}, pods))
		})
	}
}
