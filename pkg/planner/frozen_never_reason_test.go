package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestFrozenNodesNeverReason: where every Auto node is frozen, a pod no
// node could serve even with every GPU free is told why of its own claims
// (pods of one template share their claims' specs, not their names) and of
// every frozen node's GPU model, then that no node can be changed now.
func TestFrozenNodesNeverReason(t *testing.T) {
	frozen := " (nor can any Auto-mode node be changed now: node a30: its MigLayout is paused, its agent is lost, another MigLayout selects it too, or a DeviceTaintRule takes all its devices out of scheduling; node a100: its MigLayout is paused, its agent is lost, another MigLayout selects it too, or a DeviceTaintRule takes all its devices out of scheduling)"
	nodes := []Node{node("a30").frozen().gpu("A30-24GB", "4g.24gb@0", "").build(),
		node("a100").frozen().gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()}
	huge := "device.attributes['mig.miglayout.io'].memory >= 200000"
	pods := []Pod{pod("huge-1", 1).claim(huge, 1).build(), pod("huge-2", 1).claim(huge, 1).build()}
	got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"default/huge-1": "no profile of the Auto nodes' GPU models (A100-SXM4-80GB, A30-24GB) satisfies claim huge-1-gpu" + frozen,
		"default/huge-2": "no profile of the Auto nodes' GPU models (A100-SXM4-80GB, A30-24GB) satisfies claim huge-2-gpu" + frozen,
	}
	if diff := cmp.Diff(want, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
}
