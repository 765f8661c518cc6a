package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDemandOfPodsThatAlsoAskForOtherDevices: a pod is Auto-mode demand when
// any request of any of its claims asks for a MIG device, whatever else it
// asks for and in whichever order: a MIG request before a NIC's in one
// claim, or a MIG claim before a NIC claim.
func TestDemandOfPodsThatAlsoAskForOtherDevices(t *testing.T) {
	twoClaims := pod("mig-claim-then-nic-claim", 1).claim(profileIs("1g.10gb"), 1).build()
	nic := requests("nic", "nic.example.com").Claims[0]
	nic.Name = "nic-claim"
	twoClaims.Claims = append(twoClaims.Claims, nic)
	pods := []Pod{requests("mig-then-nic", "mig.miglayout.io", "nic.example.com"), twoClaims}
	got := Demand(context.Background(), driver, []*resourceapi.DeviceClass{migClass(), nicClass()}, mig.DefaultCatalog().Models(), pods)
	var names []string
	for _, p := range got {
		names = append(names, p.Pod.Name)
	}
	if diff := cmp.Diff([]string{"mig-then-nic", "mig-claim-then-nic-claim"}, names); diff != "" {
		t.Errorf("demand (-want +got):\n%s", diff)
	}
}
