package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestFailedAttemptsLeaveTheGroupLimitAlone: trying a pod of several
// devices on a node and failing changes nothing, and counts nothing toward
// the limit on GPUs changed at once across the group (GroupMaxGPUs): a pod
// planned after it still gets the GPUs the limit allows. The pod of two
// devices, which needs two GPUs changed where the group allows one, hears
// that the limit keeps it waiting.
func TestFailedAttemptsLeaveTheGroupLimitAlone(t *testing.T) {
	g := Policy{Group: "g", MaxGPUsPerNode: 2}
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, GroupMaxGPUs: map[string]int{"g": 1},
		Nodes: []Node{
			// Two 4g.40gb need both GPUs; one is in use.
			node("n1").policy(g).gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
			node("n2").policy(g).gpu("A100-SXM4-80GB", "", "").build(),
		},
		Pending: []Pod{pod("pair", 2).claim(profileIs("4g.40gb"), 2).build(), pod("big", 1).claim(profileIs("7g.80gb"), 1).build()}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/big"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if diff := cmp.Diff(map[string]string{"default/pair": ExceedsChangeLimits}, res.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
}
