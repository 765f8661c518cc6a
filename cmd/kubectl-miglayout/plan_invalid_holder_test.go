package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanNodeHeldByInvalidSelector: the plan of a MigLayout shows a node
// whose NodeMigLayout another MigLayout with an invalid selector controls as
// left as it is, as the controller leaves it, not given the new layout.
func TestPlanNodeHeldByInvalidSelector(t *testing.T) {
	old := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "old", UID: "uid-old"},
		Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "a"}},
			Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"7g.80gb": 1}}}}}
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-a", OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(),
			Kind: "MigLayout", Name: "old", UID: "uid-old", Controller: ptr.To(true)}}},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "old", GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}},
	}
	f := staticMigLayoutFile(t, "new", "[{name: halves, profiles: {3g.40gb: 2}}]")
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), old, nml}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"old", whose node selector is invalid`) || strings.Contains(out, "3g.40gb@0,3g.40gb@4") {
		t.Errorf("plan does not show gpu-a left as it is, held by old:\n%s", out)
	}
}
