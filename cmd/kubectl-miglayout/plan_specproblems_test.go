package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanJudgesRulesOnlyWhereTheControllerDoes: plan flags a rule that
// decides no GPU (RuleMatchesNoGPU, exit 3) as the controller does
// (controller.CheckSpec over selectedInventory): only once every selected
// node's agent has reported, and counting the GPUs of a node another
// MigLayout also selects. Here the rule for H100s is for a GPU plan cannot
// see: on a node whose NodeMigLayout exists but whose agent has not
// reported yet (status.gpus empty; the controller does not judge the spec
// then), or on a node in conflict (the controller counts its GPUs). plan
// must not call the rule one that "matches no GPU".
func TestPlanJudgesRulesOnlyWhereTheControllerDoes(t *testing.T) {
	a100 := reportedA100("a100-node", "7g.80gb@0")
	const rules = "  rules:\n  - name: h100\n    productName: H100-SXM5-80GB\n    profiles: {7g.80gb: 1}\n  - name: rest\n    profiles: {7g.80gb: 1}\n"
	write := func(t *testing.T) string {
		f := filepath.Join(t.TempDir(), "ml.yaml")
		doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: exit\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: free\n" + rules
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// The H100 node's NodeMigLayout, made by the controller, before its
	// agent reported anything.
	unreported := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "h100-node"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "exit"}}
	// Another MigLayout selects the H100 node too; its agent reports an H100.
	other := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"},
		Spec: v1alpha1.MigLayoutSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "h100"}},
			Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"7g.80gb": 1}}}}}
	h100 := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "h100-node"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "other"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}
	tests := map[string]struct {
		objs     []client.Object
		wantExit int // with --exit-code
	}{
		"a selected node whose agent has not reported yet": {
			objs: []client.Object{node("a100-node", map[string]string{"pool": "free"}), a100,
				node("h100-node", map[string]string{"pool": "free"}), unreported},
			wantExit: 0, // nothing changes; the spec cannot be judged yet
		},
		"a selected node in conflict with another MigLayout": {
			objs: []client.Object{node("a100-node", map[string]string{"pool": "free"}), a100,
				node("h100-node", map[string]string{"pool": "free", "gpu": "h100"}), other, h100},
			wantExit: 3, // the conflict needs a look; the H100 rule does decide a GPU
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, tc.objs, "plan", "-f", write(t), "--exit-code")
			code := exitStatus(t, err)
			if strings.Contains(out, v1alpha1.ReasonRuleMatchesNoGPU) {
				t.Errorf("plan reports a rule that decides no GPU where the controller does not judge the spec:\n%s", out)
			}
			if strings.Contains(name, "not reported") && !strings.Contains(out, "h100-node: the miglayout agent has not reported the node's GPUs yet") {
				t.Errorf("plan does not say that h100-node's agent has not reported:\n%s", out)
			}
			if code != tc.wantExit {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.wantExit, out)
			}
		})
	}
}

// TestPlanAutoSpecProblems: plan judges an Auto MigLayout's policy as the
// controller does (controller.CheckSpec): an allowed profile no GPU of its
// nodes offers (an A30 profile on an H100 node) is reported, with exit 3.
func TestPlanAutoSpecProblems(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
		}},
	}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	f := filepath.Join(t.TempDir(), "auto.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: on-demand}\nspec:\n  nodeSelector: {matchLabels: {pool: auto}}\n" +
		"  mode: Auto\n  policy:\n    allowedProfiles: [1g.10gb, 1g.6gb]\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, objs, "plan", "--exit-code", "-f", f)
	if !strings.Contains(out, v1alpha1.ReasonProfileNotOffered+": ") || !strings.Contains(out, "1g.6gb") {
		t.Errorf("plan does not report %s for 1g.6gb:\n%s", v1alpha1.ReasonProfileNotOffered, out)
	}
	var code exitCode
	if !errors.As(err, &code) || code != 3 {
		t.Errorf("exit %v, want 3", err)
	}
}
