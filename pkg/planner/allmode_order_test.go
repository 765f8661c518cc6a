package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestPodPlannedAfterAnAllModePodWaitsForItsNode: a pod planned after a pod
// that asks for every matching device of its node (allocation mode All)
// gets no device of that node, which the scheduler would give the All-mode
// pod too: it waits for that pod's allocation.
func TestPodPlannedAfterAnAllModePodWaitsForItsNode(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		// The All-mode pod is the larger: planned first.
		Pending: []Pod{pod("all", 1).claim(profileIs("3g.40gb"), 0).allDevices().build(),
			pod("b", 5).claim(profileIs("1g.10gb"), 1).build()}}
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
