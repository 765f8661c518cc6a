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

// TestPlanNodeHandedOverToAnotherMigLayout: MigLayout a controls
// shared-node, which the stored MigLayout other selects too (a conflict:
// left as it is). The file narrows a's selector off shared-node: once
// applied, other selects it alone, takes it over and applies its rule
// (7g.80gb to seven 1g.10gb). plan says so, with other's plan there, and
// exits 2; a paused other is named, and starts nothing (exit 3).
func TestPlanNodeHandedOverToAnotherMigLayout(t *testing.T) {
	owned := func(name string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: "a", UID: "uid-a", Controller: ptr.To(true)}}},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "a", GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}}},
			Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1, GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}
	}
	f := filepath.Join(t.TempDir(), "a.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: a\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: a\n    matchExpressions:\n    - {key: team, operator: DoesNotExist}\n  rules:\n  - profiles: {7g.80gb: 1}\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		paused   bool
		want     string
		wantCode int
	}{
		"taken over":        {want: "7g.80gb@0 -> 1g.10gb@0,", wantCode: 2},
		"taken over paused": {paused: true, want: "it is paused, so nothing is started there", wantCode: 3},
	} {
		t.Run(name, func(t *testing.T) {
			stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"},
				Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
					Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"7g.80gb": 1}}}}}
			other := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"},
				Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Paused: tc.paused, NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}},
					Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"1g.10gb": 7}}}}}
			objs := []client.Object{stored, other,
				node("a-node", map[string]string{"pool": "a"}), owned("a-node"),
				node("shared-node", map[string]string{"pool": "a", "team": "x"}), owned("shared-node"),
			}
			out, _, err := runWith(t, objs, "plan", "--exit-code", "-f", f)
			if code := exitStatus(t, err); code != tc.wantCode {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.wantCode, out)
			}
			for _, want := range []string{"no longer selects shared-node, which MigLayout other (Static) then selects alone and takes over", tc.want} {
				if !strings.Contains(out, want) {
					t.Errorf("plan lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "their GPUs keep the layouts they have") {
				t.Errorf("plan says shared-node keeps its layouts:\n%s", out)
			}
		})
	}
}
