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

// TestPlanUnreadableGPUWithAProblem: a rule that cannot be applied to a GPU
// NVML cannot read is told, and needs a look (exit 3), as the controller
// reports it Failed (InvalidLayout) while the GPU is left as it is.
func TestPlanUnreadableGPUWithAProblem(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: "a", UID: "uid-a", Controller: ptr.To(true)}}},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "a", GPUs: []v1alpha1.GPUSpec{{Index: 0, UUID: "GPU-0", MIGEnabled: true, Layout: "7g.80gb@0"}}},
		Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1, GPUs: []v1alpha1.GPUStatus{{Index: 0, UUID: "GPU-0", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: "ERROR_GPU_IS_LOST"}}}}
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"},
		Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"7g.80gb": 1}}}}}
	for name, tc := range map[string]struct {
		profiles string
		wantCode int
	}{
		"rule that cannot be applied": {"{3g.40gb: 2, 1g.10gb: 1}", 3},
		"rule that fits":              {"{3g.40gb: 2}", 0},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "a.yaml")
			doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: a\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: a\n  rules:\n  - profiles: " + tc.profiles + "\n"
			if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, err := runWith(t, []client.Object{stored, node("n", map[string]string{"pool": "a"}), nml}, "plan", "--exit-code", "-f", f)
			if code := exitStatus(t, err); code != tc.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, tc.wantCode, out)
			}
			if told := strings.Contains(out, "its rule cannot be applied"); told != (tc.wantCode == 3) || !strings.Contains(out, "unreadable, left as it is") {
				t.Errorf("plan tells the rule cannot be applied: %t, want %t:\n%s", told, !told, out)
			}
		})
	}
}
