package planner

import (
	"strings"
	"testing"
)

// TestPrioritizedListLaterChoicesAreTried: a pod whose prioritized list
// (firstAvailable) only its third choice can serve on the node is served
// with that choice.
func TestPrioritizedListLaterChoicesAreTried(t *testing.T) {
	// Only memory slice 6 is left: room for a 1g.10gb only.
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4", "4g.40gb@0,2g.20gb@4").build()}
	pods := []Pod{pod("list", 1).firstAvailableCounts([]string{"7g.80gb", "3g.40gb", "1g.10gb"}, []int64{1, 1, 1}).build()}
	want := trace{
		Changes: []string{"n1/0: 4g.40gb@0,2g.20gb@4 -> 4g.40gb@0,2g.20gb@4,1g.10gb@6 serves default/list"},
		Served:  []string{"default/list -> n1 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}

// TestDistinctSubrequestDevicesGoToGPUsOfTheirOwn: a distinctAttribute
// constraint on the GPU's UUID that names a prioritized list's subrequest
// ("gpu/s0") puts each of its devices on a GPU of its own, as one naming
// the request does.
func TestDistinctSubrequestDevicesGoToGPUsOfTheirOwn(t *testing.T) {
	nodes := []Node{withUUIDs(node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build())}
	pods := []Pod{pod("pair", 1).firstAvailableCounts([]string{"1g.10gb"}, []int64{2}).
		constrain(driver+"/parentUUID", true, "gpu/s0").build()}
	got := planTrace(t, nodes, pods)
	if len(got.Served) != 1 || !strings.Contains(got.Served[0], "gpu-0-") || !strings.Contains(got.Served[0], "gpu-1-") {
		t.Errorf("want the pod served with a device on each GPU, got %+v", got)
	}
}

// TestPrioritizedListChoicesBeyondTheBound: five claims, each a
// prioritized list [7g.80gb, 1g.10gb], on a node whose policy allows
// 1g.10gb alone: 32 combinations, of which only the last fits. The
// subrequests no device of the node can satisfy are not tried, so the
// bound on combinations does not leave the pod "impossible".
func TestPrioritizedListChoicesBeyondTheBound(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "", "").build()}
	b := pod("p", 1)
	for i := range 5 {
		b.firstAvailable(1, profileIs("7g.80gb"), profileIs("1g.10gb"))
		b.p.Claims[i].Name = "c" + itoa(i)
	}
	got := planTrace(t, nodes, []Pod{b.build()})
	if len(got.Served) != 1 || strings.Count(got.Served[0], "1g10gb") != 5 {
		t.Errorf("want the pod served with five 1g.10gb, got %+v", got)
	}
}
