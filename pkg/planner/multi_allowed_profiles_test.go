package planner

import (
	"strings"
	"testing"
)

// TestMultiDeviceMakesOnlyAllowedProfiles: a pod of several devices open
// to several profiles gets devices only of a profile the node's policy
// (allowedProfiles) lets the plan make, not the smallest it accepts.
func TestMultiDeviceMakesOnlyAllowedProfiles(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{AllowedProfiles: []string{"2g.20gb"}}).gpu("A100-SXM4-80GB", "", "").build()}
	pods := []Pod{pod("pair", 1).claim("device.attributes['mig.miglayout.io'].profile in ['1g.10gb', '2g.20gb']", 2).build()}
	got := planTrace(t, nodes, pods)
	for _, c := range got.Changes {
		if strings.Contains(c, "1g.10gb") {
			t.Errorf("change makes a profile the policy does not allow: %s", c)
		}
	}
	if len(got.Served) != 1 || strings.Count(got.Served[0], "-mig-2g20gb-") != 2 {
		t.Errorf("want the pod served with two 2g.20gb, got %+v", got)
	}
}
