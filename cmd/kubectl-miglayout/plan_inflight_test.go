package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoShowsUnneededCancel: plan decides as the controller decides.
// auto-node's GPU 0 is draining towards 3g.40gb@4 for ml/gone, which is no
// longer pending (deleted): the controller cancels that change before
// anything is destroyed (UnneededChanges), setting the GPU's desired layout
// back to 7g.80gb@0. The dry run shows only BlockedChanges' cancels and
// the planner's changes, so it says nothing would change.
func TestPlanAutoShowsUnneededCancel(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", Reason: "serves 1 pending pod(s): ml/gone", ServedPods: []string{"ml/gone"}}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0",
				Phase: v1alpha1.PhaseDraining, Reason: "Draining", Message: "draining gpu-0-mig-7g80gb-0-0"},
		}},
	}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cancels the change to 3g.40gb@4") {
		t.Errorf("plan does not show the cancel the controller writes (auto-node gpu-0 3g.40gb@4 -> 7g.80gb@0, none of its pods waits):\n%s", out)
	}
}
