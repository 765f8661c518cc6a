package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestCheckSpecEdges: a GPU known by its catalog model alone (no NVML
// product name) is decided by a rule for that model; a GPU's product name
// is told once where its model is the same but for case, or where it has
// no model; every node short of spares is named, up to five.
func TestCheckSpecEdges(t *testing.T) {
	modelOnly := v1alpha1.GPUStatus{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, Phase: v1alpha1.PhaseReady}
	sameButCase := a100(0).build()
	sameButCase.Product = "a100-sxm4-80gb"
	t4 := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Rules: rules(rule("t4").product("Tesla-T4").counts("7g.80gb", 1))}
	for name, tc := range map[string]struct {
		spec      v1alpha1.MigLayoutSpec
		inventory map[string][]v1alpha1.GPUStatus
		want      []SpecProblem
	}{
		"a GPU known by its model alone": {
			spec:      v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Rules: rules(rule("a").product("A100-SXM4-80GB").counts("3g.40gb", 2))},
			inventory: map[string][]v1alpha1.GPUStatus{"n1": {modelOnly}},
		},
		"a product name differing from the model in case only": {
			spec:      t4,
			inventory: map[string][]v1alpha1.GPUStatus{"n1": {sameButCase}},
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rule "t4" matches no GPU (1 selected node; GPUs: 1× a100-sxm4-80gb)`}},
		},
		"a product the catalog does not know": {
			spec:      t4,
			inventory: map[string][]v1alpha1.GPUStatus{"n1": inventory(unknownGPU(0))},
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rule "t4" matches no GPU (1 selected node; GPUs: 1× Tesla T4)`}},
		},
		"two nodes short of spares": {
			spec:      v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, Policy: &v1alpha1.AutoPolicy{Spares: map[string]int32{"7g.80gb": 2}}},
			inventory: map[string][]v1alpha1.GPUStatus{"h1": inventory(h100(0)), "h2": inventory(h100(0))},
			want: []SpecProblem{{Reason: v1alpha1.ReasonSparesNotHoldable,
				Message: "spares of 2 7g.80gb per node: h1 holds at most 1, h2 holds at most 1 (on its GPUs in MIG mode)"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckSpec(mig.DefaultCatalog(), &tc.spec, tc.inventory)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(SpecProblem{}, "Subject")); diff != "" {
				t.Errorf("CheckSpec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportedInventorySkipsSilentNodes: ReportedInventory holds the nodes
// whose agents have reported, not those with a NodeMigLayout its agent has
// not reported on yet.
func TestReportedInventorySkipsSilentNodes(t *testing.T) {
	withGPU := nodeMigLayout("gpu").status(a100(0)).build()
	silent := nodeMigLayout("silent").build()
	sel := Selection{Nodes: []string{"gpu", "silent"}}
	got := ReportedInventory(sel, map[string]*v1alpha1.NodeMigLayout{"gpu": withGPU, "silent": silent})
	if diff := cmp.Diff(map[string][]v1alpha1.GPUStatus{"gpu": withGPU.Status.GPUs}, got); diff != "" {
		t.Errorf("ReportedInventory (-want +got):\n%s", diff)
	}
}
