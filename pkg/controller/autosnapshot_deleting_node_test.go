package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestNodeBeingDeletedIsNoAutoNode: a node being deleted is left out of the
// snapshot: nothing is planned on it, however plannable its GPUs.
func TestNodeBeingDeletedIsNoAutoNode(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	gone := node("n1", map[string]string{"pool": "auto"})
	gone.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml},
		Nodes: []corev1.Node{*gone, *node("n2", map[string]string{"pool": "auto"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"n1": autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
			"n2": autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		}, Driver: "mig.miglayout.io"}
	var got []string
	for _, n := range BuildSnapshot(in, mig.DefaultCatalog()).Nodes {
		got = append(got, n.Node.Name)
	}
	if diff := cmp.Diff([]string{"n2"}, got); diff != "" {
		t.Errorf("snapshot nodes (-want +got):\n%s", diff)
	}
}
