package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticTurnsMIGOff: a rule that turns MIG mode off shows the GPU's
// MIG devices destroyed and the whole GPU created; where the node's spec
// asks for MIG off already (the change is in flight), the new rule asks the
// same, so nothing in flight is replaced or cancelled.
func TestPlanStaticTurnsMIGOff(t *testing.T) {
	gpu := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
		MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}
	fresh := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{gpu}}}
	flying := fresh.DeepCopy()
	flying.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}
	for name, nml := range map[string]*v1alpha1.NodeMigLayout{"from MIG on": fresh, "with MIG off in flight": flying} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
				"plan", "-f", staticMigLayoutFile(t, "whole", "[{name: whole, migEnabled: false}]"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"gpu-0  H100-SXM5-80GB: 7g.80gb@0 -> MIG off\n",
				"           destroy:  7g.80gb@0 (",
				"           create:   whole GPU, MIG mode off\n",
				"Summary: 1 GPU would change on 1 node.\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("plan lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "in flight") {
				t.Errorf("plan tells of a change in flight replaced or cancelled, though the spec asks for MIG off already:\n%s", out)
			}
		})
	}
}
