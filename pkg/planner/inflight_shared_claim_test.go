package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestChangeInFlightForPodsSharingAClaim: a change in flight made for pods
// that share one claim names all of them (Change.Serves); the claim is
// allocated once, so they are all served by the one device the first of
// them gets, and the other free device the change brings stays free for
// other pods.
func TestChangeInFlightForPodsSharingAClaim(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "").changingFor("default/a", "default/b").build()}
	pods := []Pod{
		pod("a", 2).sharedClaim("shared", profileIs("1g.10gb")).build(),
		pod("b", 1).sharedClaim("shared", profileIs("1g.10gb")).build(),
		pod("other", 1).claim(profileIs("1g.10gb"), 1).build(),
	}
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace{Served: []string{
		"default/a -> n1 gpu-0-mig-1g10gb-19-0",
		"default/other -> n1 gpu-0-mig-1g10gb-19-1",
		"default/b -> n1 gpu-0-mig-1g10gb-19-0",
	}}
	if diff := cmp.Diff(want, toTrace(res), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
