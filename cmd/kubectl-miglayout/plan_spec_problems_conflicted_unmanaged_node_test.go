package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanJudgesSpecWithoutTheGPUsOfAnUnmanagedNodeInConflict: a node
// another MigLayout selects too, that no MigLayout manages yet (no
// NodeMigLayout: the controller makes none for a node in conflict), has no
// report for the controller to count: controller.SelectedInventory leaves
// it out, so a rule only its GPUs (published in its ResourceSlices) would
// match is reported as deciding no GPU (RuleMatchesNoGPU). plan, which
// judges the spec as the controller does, reports it too, leaving out that
// node's published GPUs.
func TestPlanJudgesSpecWithoutTheGPUsOfAnUnmanagedNodeInConflict(t *testing.T) {
	cat := mig.DefaultCatalog()
	h100, err := cat.Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	a100 := reportedA100("a100-node", "7g.80gb@0")
	other := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"},
		Spec: v1alpha1.MigLayoutSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "h100"}},
			Rules: []v1alpha1.LayoutRule{{Profiles: map[string]int32{"7g.80gb": 1}}}}}
	labels := map[string]map[string]string{"a100-node": {"pool": "a"}, "h100-node": {"pool": "a", "gpu": "h100"}}
	objs := []client.Object{node("a100-node", labels["a100-node"]), a100, node("h100-node", labels["h100-node"]), other,
		slice("h100-node", migslices.DefaultDriverName, migslices.GPUDevice(migslices.PlannedGPU(h100, 0)))}

	// The controller's judgement, with its own functions, on the
	// NodeMigLayouts there are.
	ml := v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "exit", UID: "planned-exit"},
		Spec: v1alpha1.MigLayoutSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Rules: []v1alpha1.LayoutRule{{Name: "h100", ProductName: "H100-SXM5-80GB", Profiles: map[string]int32{"7g.80gb": 1}},
				{Name: "rest", Profiles: map[string]int32{"7g.80gb": 1}}}}}
	sel, err := controller.SelectNodes(&ml, []v1alpha1.MigLayout{*other, ml}, labels)
	if err != nil {
		t.Fatal(err)
	}
	problems := controller.CheckSpec(cat, &ml.Spec, controller.SelectedInventory(sel, map[string]*v1alpha1.NodeMigLayout{"a100-node": a100}))
	if len(problems) != 1 || problems[0].Reason != v1alpha1.ReasonRuleMatchesNoGPU {
		t.Fatalf("the controller judges %+v, want one %s", problems, v1alpha1.ReasonRuleMatchesNoGPU)
	}

	out, _, _ := runWith(t, objs, "plan", "--exit-code", "-f",
		staticMigLayoutFile(t, "exit", "[{name: h100, productName: H100-SXM5-80GB, profiles: {7g.80gb: 1}}, {name: rest, profiles: {7g.80gb: 1}}]"))
	if want := problems[0].Reason + ": " + problems[0].Message; !strings.Contains(out, want) {
		t.Errorf("plan lacks the controller's %q:\n%s", want, out)
	}
}
