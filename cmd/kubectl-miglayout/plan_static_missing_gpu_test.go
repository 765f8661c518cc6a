package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticLeavesMissingGPUAsItIs: a GPU its agent reports missing
// (NVML no longer counts it) is left as it is, with the agent's message,
// and counted as no change; the node's other GPUs are planned.
func TestPlanStaticLeavesMissingGPUAsItIs(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Phase: v1alpha1.PhaseFailed,
				Reason: v1alpha1.ReasonGPUMissing, Message: "NVML counts 1 GPU, gpu 0 is gone"},
			{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
				Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady},
		}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gpu-0  A100-SXM4-80GB: missing, left as it is until NVML counts it again (NVML counts 1 GPU, gpu 0 is gone)\n",
		"gpu-1  A100-SXM4-80GB: 7g.80gb@0 -> 3g.40gb@0,3g.40gb@4\n",
		"Summary: 1 GPU would change on 1 node.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
