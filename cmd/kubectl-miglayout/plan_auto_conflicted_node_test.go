package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoLeavesANodeInConflictOut: two Auto MigLayouts of one file
// that select the same node leave it as it is; neither takes it over, as
// the controller takes over no node in conflict, so a pending pod only
// that node could serve is one no Auto node can serve.
func TestPlanAutoLeavesANodeInConflictOut(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}}}}
	claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod}
	out, _, err := runWith(t, objs, "plan", "-f", manifestFile(t, autoMigLayoutDoc("a", "auto"), autoMigLayoutDoc("b", "auto")))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "Pods no Auto node can serve:\n  ml/whole: "); n != 2 {
		t.Errorf("ml/whole told %d times as a pod no Auto node can serve, want under both MigLayouts (the node in conflict is neither's):\n%s", n, out)
	}
	if strings.Contains(out, "Pods no GPU can take now") {
		t.Errorf("plan tells of ml/whole waiting for the node in conflict, which no Auto MigLayout takes over:\n%s", out)
	}
}
