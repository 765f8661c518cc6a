package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanProblemWithChangeInFlight: a GPU whose new rule cannot be applied
// (three 3g.40gb on an A100) keeps a change its agent has begun (the
// controller carries it out), and drops one not begun (counted as a change
// of the node's spec).
func TestPlanProblemWithChangeInFlight(t *testing.T) {
	const halves = "3g.40gb@0,3g.40gb@4"
	for name, tc := range map[string]struct {
		status   v1alpha1.GPUStatus
		want     string
		wantCode int
	}{
		"begun": {
			status:   v1alpha1.GPUStatus{Layout: "3g.40gb@0", Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "creating GPU instance: ERROR_UNKNOWN"},
			want:     "; the change begun, to " + halves + ", is carried out",
			wantCode: 3,
		},
		"not begun": {
			status:   v1alpha1.GPUStatus{Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady},
			want:     "cannot be configured, left as it is: ",
			wantCode: 3,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := tc.status
			g.Index, g.Product, g.Model, g.MIGEnabled, g.MIGPending = 0, "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", true, true
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
				Spec:   v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: halves}}},
				Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1, GPUs: []v1alpha1.GPUStatus{g}}}
			out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
				"plan", "--exit-code", "-f", staticMigLayoutFile(t, "halves", "[{gpuIndices: [0], profiles: {3g.40gb: 3}}]"))
			if code := exitStatus(t, err); !strings.Contains(out, tc.want) || code != tc.wantCode {
				t.Errorf("exit %d, want %d; plan lacks %q:\n%s", exitStatus(t, err), tc.wantCode, tc.want, out)
			}
			if cancels := strings.Contains(out, "cancels the change in flight"); cancels != (name == "not begun") {
				t.Errorf("plan cancels the change in flight: %t, want %t:\n%s", cancels, !cancels, out)
			}
		})
	}
}
