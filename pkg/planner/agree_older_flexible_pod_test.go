package planner

import "testing"

// TestOlderFlexiblePodPlannedAfterExactOneAgreesWithScheduler: of one
// priority the planner takes the larger pod first and kube-scheduler the
// older. Here the larger pod asks for exactly a 3g.40gb and gets the free
// one; the older asks for any device of 9000 MiB or more, and the
// scheduler gives it the smallest free device it accepts. The plan may not
// serve it with the free 4g.40gb, since the scheduler would give it the
// 3g.40gb (40 GB, fewer multiprocessors) promised to the other pod.
func TestOlderFlexiblePodPlannedAfterExactOneAgreesWithScheduler(t *testing.T) {
	n := node("n1").policy(Policy{AllowedProfiles: []string{"3g.40gb", "4g.40gb"}}).gpu("A100-SXM4-80GB", "4g.40gb@0,3g.40gb@4", "").build()
	replayed(t, Snapshot{Nodes: []Node{n}, Pending: []Pod{
		pod("exact", 1).claim(profileIs("3g.40gb"), 1).build(),
		pod("any", 5).claim("device.attributes['mig.miglayout.io'].memory >= 9000", 1).build(),
	}})
}
