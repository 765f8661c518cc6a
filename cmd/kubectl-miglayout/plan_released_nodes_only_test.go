package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanReleasesOnlyNodesItNoLongerSelects: of the NodeMigLayouts a
// MigLayout controls, plan lists as released only those of nodes it no
// longer selects: not one of a node it still selects, nor one being
// deleted already.
func TestPlanReleasesOnlyNodesItNoLongerSelects(t *testing.T) {
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "exit", UID: "uid-exit"}}
	owned := func(name string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: "exit", UID: "uid-exit", Controller: ptr.To(true)}}},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "exit"},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}
	}
	going := owned("going-node")
	going.DeletionTimestamp = ptr.To(metav1.Unix(1000, 0))
	going.Finalizers = []string{"example.com/hold"}
	objs := []client.Object{stored,
		node("kept-node", map[string]string{"pool": "new"}), owned("kept-node"),
		node("old-node", map[string]string{"pool": "old"}), owned("old-node"),
		node("going-node", map[string]string{"pool": "old"}), going,
	}
	f := filepath.Join(t.TempDir(), "ml.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: exit\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: new\n  rules:\n  - profiles: {7g.80gb: 1}\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, objs, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if want := "  no longer selects old-node: released, their GPUs keep the layouts they have\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q (old-node alone released):\n%s", want, out)
	}
}
