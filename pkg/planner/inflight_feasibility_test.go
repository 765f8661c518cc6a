package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestChangeInFlightForAPodThatMayNoLongerRunThere: a pod a change in flight
// was made for (GPU.Serves) gets its devices only while it may still run
// on that node: once the node is tainted (or relabelled) so that it may
// not, the pod is planned like any other, on a node it may run on.
func TestChangeInFlightForAPodThatMayNoLongerRunThere(t *testing.T) {
	nodes := []Node{
		node("n1").taint("maintenance").gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p").build(),
		node("n2").gpu("A100-SXM4-80GB", "", "").build(),
	}
	pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb"), 1).build()}
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace{
		Changes: []string{"n2/0: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change"},
	}
	if diff := cmp.Diff(want, toTrace(res), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
