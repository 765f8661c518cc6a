package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestReplayGivesPlannedPodsTheirOwnOtherDevices: when kube-scheduler's
// replay of a node (nodeAgrees) takes the pods planned there, the other
// driver's devices the plan gave each of them are theirs to get, not held
// by someone else: the node's only NIC, planned for pod a, does not keep
// pod b (any device of 9000 MiB or more, so replayed) off the node.
func TestReplayGivesPlannedPodsTheirOwnOtherDevices(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{nicSlice("n1", "nic0")}
	pods := []Pod{
		pod("a", 5).claim(profileIs("3g.40gb"), 1).withNIC().build(),
		pod("b", 1).claim("device.attributes['mig.miglayout.io'].memory >= 9000", 1).build(),
	}
	want := trace{
		Changes: []string{"n1/0: (empty) -> 1g.10gb@0,3g.40gb@4 serves default/a, default/b"},
		Served: []string{
			"default/a -> n1 gpu-0-mig-3g40gb-9-4 after change",
			"default/b -> n1 gpu-0-mig-1g10gb-19-0 after change",
		},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods, nicClass()))
}

// TestReplayCountsOtherDevicesTakenByPodsBefore: kube-scheduler takes the
// older pod b first, and b prefers the node's only NIC to a MIG device
// (a prioritized list): it gets the NIC, which the plan gave the larger
// pod a, and a then finds none. The replay counts the NIC b takes, so b
// is not promised the MIG device: it waits.
func TestReplayCountsOtherDevicesTakenByPodsBefore(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{nicSlice("n1", "nic0")}
	b := pod("b", 5).build()
	c := &resourceapi.ResourceClaim{}
	c.Namespace, c.Name = "default", "b-list"
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "nic", DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "mig", DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: profileIs("1g.10gb")}}}}}}}
	b.Claims = append(b.Claims, c)
	pods := []Pod{pod("a", 1).claim(profileIs("3g.40gb"), 1).withNIC().build(), b}
	want := trace{
		Changes:    []string{"n1/0: (empty) -> 3g.40gb@4 serves default/a"},
		Served:     []string{"default/a -> n1 gpu-0-mig-3g40gb-9-4 after change"},
		Unservable: map[string]string{"default/b": NoRoom},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods, nicClass()))
}
