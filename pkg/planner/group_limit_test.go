package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestNodesOfNoGroupShareNoLimit: Snapshot.GroupMaxGPUs limits the GPUs
// changed at once across the nodes of one Policy.Group; nodes of no group
// ("") share none, whatever GroupMaxGPUs lists under "".
func TestNodesOfNoGroupShareNoLimit(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, GroupMaxGPUs: map[string]int{"": 1},
		Nodes:   []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{pod("p1", 2).claim(profileIs("7g.80gb"), 1).build(), pod("p2", 1).claim(profileIs("7g.80gb"), 1).build()}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/p1", "default/p2"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
}
