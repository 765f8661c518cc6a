package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanBeforeApplyJudgesRulesOnPublishedGPUs: plan's main use is before
// a MigLayout is applied, when no NodeMigLayout exists yet and it plans
// every node on the GPUs its ResourceSlices publish. Every selected node's
// GPUs are known then, and a rule for H100s on a cluster of A100s decides
// no GPU: plan says so (RuleMatchesNoGPU, exit 3 with --exit-code) before
// the MigLayout is applied.
func TestPlanBeforeApplyJudgesRulesOnPublishedGPUs(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g0 := migslices.PlannedGPU(model, 0)
	d, err := migslices.PlannedMIGDevice(g0, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To("gpu-a"),
			Pool: resourceapi.ResourcePool{Name: "gpu-a", Generation: 1, ResourceSliceCount: 1}, Devices: []resourceapi.Device{d}}}
	f := staticMigLayoutFile(t, "h100s", "[{name: h100, productName: H100-SXM5-80GB, profiles: {7g.80gb: 1}}, {name: rest, profiles: {7g.80gb: 1}}]")
	out, _, _ := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), s}, "plan", "-f", f)
	if !strings.Contains(out, "GPUs as its ResourceSlices publish them") {
		t.Fatalf("plan did not plan gpu-a from its ResourceSlices:\n%s", out)
	}
	if !strings.Contains(out, v1alpha1.ReasonRuleMatchesNoGPU) {
		t.Errorf("plan of a MigLayout not applied yet, every node's GPUs published, does not report the H100 rule that decides no GPU:\n%s", out)
	}
}
