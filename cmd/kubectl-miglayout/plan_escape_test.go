package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanEscapesAgentMessages: an agent-written status message with
// terminal escapes reaches `kubectl miglayout plan`'s output escaped.
func TestPlanEscapesAgentMessages(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Phase: v1alpha1.PhaseFailed,
				Reason: v1alpha1.ReasonGPUMissing, Message: "gone\x1b]52;c;ZXZpbA==\x07\x1b[2J"},
		}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("plan output carries a raw ESC from the agent's status: %q", out)
	}
}
