package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanJudgesSpecOnAgentReportsNotSlices: a selected node whose
// NodeMigLayout exists but whose agent has not reported yet holds the
// spec's check back, as in the controller, even where its ResourceSlices
// publish GPUs: those count only for a node without a NodeMigLayout. Here
// the slices publish an A100, and a rule for H100s is not reported as one
// that decides no GPU.
func TestPlanJudgesSpecOnAgentReportsNotSlices(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	published := slice("gpu-b", migslices.DefaultDriverName, migslices.GPUDevice(migslices.PlannedGPU(a100, 0)))
	reported := reportedA100("gpu-a", "7g.80gb@0")
	unreported := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-b"}, Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "exit"}}
	objs := []client.Object{node("gpu-a", map[string]string{"pool": "a"}), reported,
		node("gpu-b", map[string]string{"pool": "a"}), unreported, published}
	out, _, err := runWith(t, objs, "plan", "--exit-code", "-f",
		staticMigLayoutFile(t, "exit", "[{name: h100, productName: H100-SXM5-80GB, profiles: {7g.80gb: 1}}, {name: rest, profiles: {7g.80gb: 1}}]"))
	if err != nil {
		t.Errorf("exit %v, want 0 (nothing changes, the spec cannot be judged yet):\n%s", err, out)
	}
	if strings.Contains(out, v1alpha1.ReasonRuleMatchesNoGPU) {
		t.Errorf("plan reports a rule that decides no GPU before every selected node's agent has reported:\n%s", out)
	}
	if !strings.Contains(out, "gpu-b: the miglayout agent has not reported the node's GPUs yet") {
		t.Errorf("plan does not say that gpu-b's agent has not reported:\n%s", out)
	}
}
