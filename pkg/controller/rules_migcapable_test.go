package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestRuleForEveryGPULeavesGPUsWithoutMIG: on a node with an A100 and an
// L4 (which does not support MIG, and which the catalog lacks), a rule that
// names neither a product nor GPU indices lays out the A100 and leaves the
// L4 alone, with no problem reported; a rule that names the L4's index
// still reports it (the user asked for it); an agent that does not report
// migCapable is judged as before.
func TestRuleForEveryGPULeavesGPUsWithoutMIG(t *testing.T) {
	a100 := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGCapable: ptr.To(true), MIGEnabled: true, MIGPending: true}
	l4 := v1alpha1.GPUStatus{Index: 1, Product: "NVIDIA L4", MIGCapable: ptr.To(false)}
	unreported := l4
	unreported.MIGCapable = nil
	everyGPU := v1alpha1.LayoutRule{Profiles: map[string]int32{"3g.40gb": 2}}
	byIndex := v1alpha1.LayoutRule{GPUIndices: []int32{0, 1}, Profiles: map[string]int32{"3g.40gb": 2}}
	tests := map[string]struct {
		rule         v1alpha1.LayoutRule
		l4           v1alpha1.GPUStatus
		wantSpecs    []int32
		wantProblems []int32
	}{
		"every GPU":                  {everyGPU, l4, []int32{0}, nil},
		"by index":                   {byIndex, l4, []int32{0}, []int32{1}},
		"agent not reporting it yet": {everyGPU, unreported, []int32{0}, []int32{1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			specs, problems := DesiredGPUs(mig.DefaultCatalog(), []v1alpha1.LayoutRule{tc.rule}, []v1alpha1.GPUStatus{a100, tc.l4}, nil)
			var gotSpecs, gotProblems []int32
			for _, s := range specs {
				gotSpecs = append(gotSpecs, s.Index)
			}
			for _, p := range problems {
				gotProblems = append(gotProblems, p.GPU)
			}
			if diff := cmp.Diff(tc.wantSpecs, gotSpecs); diff != "" {
				t.Errorf("specs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantProblems, gotProblems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
