package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestNodeWithRoomBeforeOneWithout: a node with room for the pod is
// planned on whatever nodes without room follow it in the snapshot.
func TestNodeWithRoomBeforeOneWithout(t *testing.T) {
	nodes := []Node{cpuNode("quiet", "8"), requested(cpuNode("busy", "8"), "7", 3)}
	res, err := Plan(t.Context(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: nodes,
		Pending: []Pod{cpuPod("p", 0, "4", false)}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace{
		Changes:    []string{"quiet/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
		Served:     []string{"default/p -> quiet gpu-0-mig-1g10gb-19-6 after change"},
		Unservable: map[string]string{},
	}
	if diff := cmp.Diff(want, toTrace(res)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
