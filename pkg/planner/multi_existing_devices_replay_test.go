package planner

import (
	"slices"
	"strings"
	"testing"
)

// TestPodOfSeveralDevicesOnExistingDevicesAgreesWithTheScheduler: a pod of
// several devices that the node's free devices fit as planned so far is
// served with them only where kube-scheduler would give them to it. Pod a
// (priority 10) is planned on GPU 0's 1g.10gb@0, the free device whose
// taking costs that GPU least; kube-scheduler takes the first device of
// the publication order, GPU 1's 1g.10gb@6 (a 1g.10gb at placement 6
// loses less room than one at 0), for it. Pod b asks for a 1g.10gb of
// GPU 1 and a 2g.20gb: the free devices fit it beside a as planned, but
// kube-scheduler, serving a first, leaves b no 1g.10gb on GPU 1, so b must
// not be promised GPU 1's 1g.10gb@6.
func TestPodOfSeveralDevicesOnExistingDevicesAgreesWithTheScheduler(t *testing.T) {
	nodes := []Node{node("n1").
		gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
		gpu("A100-SXM4-80GB", "2g.20gb@4,1g.10gb@6", "").build()}
	pods := []Pod{
		pod("a", 1).priority(10).claim(profileIs("1g.10gb"), 1).build(),
		pod("b", 5).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 1", 1).claim(profileIs("2g.20gb"), 1).build(),
	}
	got := planTrace(t, nodes, pods)
	if !slices.ContainsFunc(got.Served, func(s string) bool { return s == "default/a -> n1 gpu-0-mig-1g10gb-19-0" }) {
		t.Errorf("pod a not served with GPU 0's free 1g.10gb@0: %+v", got)
	}
	for _, s := range got.Served {
		if strings.HasPrefix(s, "default/b ") && strings.Contains(s, "gpu-1-mig-1g10gb-19-6,") {
			t.Errorf("pod b promised GPU 1's 1g.10gb@6, which kube-scheduler gives pod a first: %+v", got)
		}
	}
}
