package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// replayed plans snap (the mig class, the test driver and t0 added) and
// fails t for each served pod kube-scheduler would not allocate where the
// plan serves it, in either queue order (schedulerReplay).
func replayed(t *testing.T, snap Snapshot) Result {
	t.Helper()
	snap.Driver, snap.Now = driver, t0
	snap.Classes = append([]*resourceapi.DeviceClass{migClass()}, snap.Classes...)
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, newestFirst := range []bool{false, true} {
		if failed := schedulerReplay(t, snap, res, newestFirst); len(failed) > 0 {
			t.Errorf("newest first %t: kube-scheduler cannot allocate %v where the plan serves them (plan %+v)", newestFirst, failed, toTrace(res))
		}
	}
	return res
}

// TestPinnedPodAgreesWithScheduler: pod x asks for a 1g.10gb on GPU 0 (its
// claim reads parentIndex); an older pod of higher priority takes any
// device of 9000 MiB or more. The device made for x must be one the
// scheduler, which takes the older pod first (and GPU 0's devices first),
// leaves to x.
func TestPinnedPodAgreesWithScheduler(t *testing.T) {
	n := node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "", "").
		gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", "4g.40gb@0,1g.10gb@6").build()
	replayed(t, Snapshot{Nodes: []Node{n}, Pending: []Pod{
		pod("flex", 10).priority(10).claim("device.attributes['mig.miglayout.io'].memory >= 9000", 1).build(),
		pod("x", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build(),
	}})
}

// TestInFlightAllModeJudgedOnWholeNode: a change in flight on GPU 0 brings
// a free 1g.10gb for pod all, which asks for every 1g.10gb; GPU 1's
// 1g.10gb is in use. The scheduler would fail the claim (all matching
// devices of the node, one of them taken): the pod is not served on the
// change's devices.
func TestInFlightAllModeJudgedOnWholeNode(t *testing.T) {
	n := node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "1g.10gb@0", "").changingFor("default/all").
		gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()
	all := pod("all", 10).claim(profileIs("1g.10gb"), 0).build()
	ex := all.Claims[0].Spec.Devices.Requests[0].Exactly
	ex.AllocationMode, ex.Count = resourceapi.DeviceAllocationModeAll, 0
	replayed(t, Snapshot{Nodes: []Node{n}, Pending: []Pod{all}})
}

// TestNodeWithoutGPUs: a node of the snapshot with no GPU (only another
// driver's devices) is planned on without a panic: a pod whose claim
// takes the other driver's device there is judged by the allocator.
func TestNodeWithoutGPUs(t *testing.T) {
	n0 := node("n0").build()
	n0.OtherSlices = append(n0.OtherSlices, nicSlice("n0", "nic-0"))
	n1 := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	p := pod("p", 1).build()
	c := &resourceapi.ResourceClaim{}
	c.Namespace, c.Name = "default", "p-list"
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "mig", DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: profileIs("7g.80gb")}}}},
		{Name: "nic", DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}
	p.Claims = append(p.Claims, c)
	replayed(t, Snapshot{Nodes: []Node{n0, n1}, Classes: []*resourceapi.DeviceClass{nicClass()},
		Pending: []Pod{p, pod("big", 5).claim(profileIs("7g.80gb"), 1).build()}})
}
