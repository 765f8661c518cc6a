package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestOtherDriversDeviceServesOnePodAcrossNodes: another driver's device
// of a pool every node shares, which a pod served on one node takes, is
// not given to a pod planned after it on another node: that pod waits.
func TestOtherDriversDeviceServesOnePodAcrossNodes(t *testing.T) {
	var nodes []Node
	for _, name := range []string{"n1", "n2"} {
		n := node(name).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
		n.OtherSlices = []*resourceapi.ResourceSlice{sharedNICSlice("", "nic-0")}
		nodes = append(nodes, n)
	}
	snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass(), nicClass()}, Now: t0,
		Pending: []Pod{
			pod("a", 2).claim(profileIs("3g.40gb"), 1).withNIC().build(),
			pod("b", 1).claim(profileIs("3g.40gb"), 1).withNIC().build(),
		}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/a"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if diff := cmp.Diff(map[string]string{"default/b": NoRoom}, res.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
}
