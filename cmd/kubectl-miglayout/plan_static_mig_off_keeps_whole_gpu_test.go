package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticMIGOffDestroysOnlyTheMIGDevices: turning MIG off destroys
// the GPU's MIG devices and creates the whole GPU; the whole-GPU device is
// destroyed only where MIG goes on (with MIG on, no whole-GPU device
// exists to destroy).
func TestPlanStaticMIGOffDestroysOnlyTheMIGDevices(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "whole", "[{name: whole, migEnabled: false}]"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out, "           destroy:  "); got != 2 {
		t.Errorf("%d devices destroyed, want the 2 MIG devices:\n%s", got, out)
	}
	if strings.Contains(out, "destroy:  whole GPU") {
		t.Errorf("plan destroys the whole GPU where MIG goes off:\n%s", out)
	}
}
