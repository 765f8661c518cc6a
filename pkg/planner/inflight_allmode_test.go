package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestChangesInFlightOnANodeOfAnAllModePod: a pod that asks for every
// matching device of a node (allocation mode All) shares the node with no
// other pod of the plan, also where changes in flight there name both: the
// All-mode pod, planned first, gets the devices its change brings, and the
// other pod waits for it to be allocated rather than be promised a device
// the scheduler would give the All-mode pod too.
func TestChangesInFlightOnANodeOfAnAllModePod(t *testing.T) {
	nodes := []Node{node("n1").
		gpu("A100-SXM4-80GB", "1g.10gb@0", "").changingFor("default/small").
		gpu("A100-SXM4-80GB", "3g.40gb@0", "").changingFor("default/all").build()}
	pods := []Pod{
		pod("all", 2).claim("", 0).allDevices().build(),
		pod("small", 1).claim(profileIs("1g.10gb"), 1).build(),
	}
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/all"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if diff := cmp.Diff(map[string]string{"default/small": WaitsForAllModeNode}, res.Unservable, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
	if len(res.Changes) != 0 {
		t.Errorf("changes %+v, want none: both GPUs are changing already", res.Changes)
	}
}
