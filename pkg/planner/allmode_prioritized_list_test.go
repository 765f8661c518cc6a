package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestAllModeSubrequestHoldsItsNode: a prioritized list whose subrequest
// asks for every matching device (allocation mode All) takes every such
// device of the node, as a plain All-mode request does: a pod planned after
// it gets no device of that node and waits for its allocation.
func TestAllModeSubrequestHoldsItsNode(t *testing.T) {
	all := pod("all", 1).firstAvailable(1, profileIs("3g.40gb")).build()
	sub := &all.Claims[0].Spec.Devices.Requests[0].FirstAvailable[0]
	sub.AllocationMode, sub.Count = resourceapi.DeviceAllocationModeAll, 0
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes:   []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{all, pod("b", 5).claim(profileIs("1g.10gb"), 1).build()}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/all"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if diff := cmp.Diff(map[string]string{"default/b": WaitsForAllModeNode}, res.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
}
