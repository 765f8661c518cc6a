package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// TestOtherDriversDeviceByAdminAccessStaysFree: another driver's device a
// pod of the plan gets with admin access only is used up by no one, as
// kube-scheduler counts it: a pod planned after it on the node still gets
// the same NIC for itself.
func TestOtherDriversDeviceByAdminAccessStaysFree(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{nicSlice("n1", "nic0")}
	monitor := pod("monitor", 5).claim(profileIs("3g.40gb"), 1).withNIC().build()
	monitor.Claims[1].Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	worker := pod("worker", 1).claim(profileIs("1g.10gb"), 1).withNIC().build()
	got := planTrace(t, []Node{n}, []Pod{monitor, worker}, nicClass())
	want := trace{
		Changes: []string{"n1/0: (empty) -> 1g.10gb@0,3g.40gb@4 serves default/monitor, default/worker"},
		Served: []string{
			"default/monitor -> n1 gpu-0-mig-3g40gb-9-4 after change",
			"default/worker -> n1 gpu-0-mig-1g10gb-19-0 after change",
		},
	}
	checkTrace(t, want, got)
}
