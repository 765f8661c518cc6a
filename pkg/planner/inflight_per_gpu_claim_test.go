package planner

import "testing"

// TestChangeInFlightForPodWhoseClaimReadsAnotherGPU: a change in flight on
// GPU 1 names pod p, whose claim (it reads parentIndex) now accepts only
// devices of GPU 0: the device the change brings is judged on GPU 1's own
// attributes and refused, and p is planned like any other pod, on GPU 0.
func TestChangeInFlightForPodWhoseClaimReadsAnotherGPU(t *testing.T) {
	n := node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "", "").
		gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p").build()
	pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build()}
	want := trace{
		Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods))
}
