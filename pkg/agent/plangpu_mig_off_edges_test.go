package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestPlanGPUWithoutMIGOrCatalogEntry: a GPU of a catalogued model that
// answers NOT_SUPPORTED to the MIG mode (MIG not offered there, e.g. in a
// VM) meets a spec asking for MIG off (Ready) and fails one asking for a
// layout (UnknownGPU) without any work planned; a GPU of no catalogued
// model whose MIG mode is on with its disable pending does not meet a spec
// asking for MIG off: MIG stays on until the next reset.
func TestPlanGPUWithoutMIGOrCatalogEntry(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	noMIG := gpu.GPU{Index: 0, ProductName: "NVIDIA A100-SXM4-80GB", Model: a100}
	tests := map[string]struct {
		gpu  gpu.GPU
		spec v1alpha1.GPUSpec
		want [2]string // phase, reason
	}{
		"catalogued model without MIG, MIG off asked": {
			gpu:  noMIG,
			spec: v1alpha1.GPUSpec{Index: 0, MIGEnabled: false},
			want: [2]string{string(v1alpha1.PhaseReady), v1alpha1.ReasonLayoutApplied},
		},
		"catalogued model without MIG, a layout asked": {
			gpu:  noMIG,
			spec: spec(0, "7g.80gb@0"),
			want: [2]string{string(v1alpha1.PhaseFailed), v1alpha1.ReasonUnknownGPU},
		},
		"uncatalogued model with MIG on and its disable pending, MIG off asked": {
			gpu:  gpu.GPU{Index: 0, ProductName: "NVIDIA Future GPU", MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: false}},
			spec: v1alpha1.GPUSpec{Index: 0, MIGEnabled: false},
			want: [2]string{string(v1alpha1.PhaseFailed), v1alpha1.ReasonUnknownGPU},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &Repartitioner{}
			p, res := r.planGPU([]GPUState{{GPU: tc.gpu}}, tc.spec, sets.New[string]())
			if p != nil || res == nil {
				t.Fatalf("plan %+v, result %+v: want a result and no work", p, res)
			}
			if diff := cmp.Diff(tc.want, [2]string{string(res.Phase), res.Reason}); diff != "" {
				t.Errorf("phase and reason (-want +got):\n%s\nmessage: %s", diff, res.Message)
			}
		})
	}
}
