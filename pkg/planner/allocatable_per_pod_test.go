package planner

import (
	"testing"
)

// TestAllocatableJudgedForEachPodsRequests: whether a node has what a pod
// requests allocatable at all is judged on that pod's own requests, not on
// those of a pod of the same node selector, affinity and tolerations
// planned before it.
func TestAllocatableJudgedForEachPodsRequests(t *testing.T) {
	n := node("small").gpu("A100-SXM4-80GB", "", "").allocatableCPU("8").build()
	pods := []Pod{
		pod("fits", 2).claim(profileIs("1g.10gb"), 1).requestsCPU("1").build(),
		pod("too-large", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("64").build(),
	}
	want := trace{
		Changes:    []string{"small/0: (empty) -> 1g.10gb@6 serves default/fits"},
		Served:     []string{"default/fits -> small gpu-0-mig-1g10gb-19-6 after change"},
		Unservable: map[string]string{"default/too-large": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods))
}

// TestPodRequestingAllTheAllocatableIsPlanned: a pod that requests exactly
// what an empty node has allocatable fits there.
func TestPodRequestingAllTheAllocatableIsPlanned(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").allocatableCPU("8").build()
	p := pod("p", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("8").build()
	want := trace{
		Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, []Pod{p}))
}
