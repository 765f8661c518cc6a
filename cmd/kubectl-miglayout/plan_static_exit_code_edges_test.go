package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticExitCodeOfOneGPU: with --exit-code, a GPU its rule cannot
// configure (a layout that does not fit it) is something to look at first
// (3), and a change in flight that a GPU no rule matches any more stops
// (the node's spec changes) is a change (2), each alone on the node.
func TestPlanStaticExitCodeOfOneGPU(t *testing.T) {
	gpu := func(i int32, layout string) v1alpha1.GPUStatus {
		return v1alpha1.GPUStatus{Index: i, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: layout, Phase: v1alpha1.PhaseReady}
	}
	ready := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{gpu(0, "7g.80gb@0"), gpu(1, "7g.80gb@0")}}}
	// GPU 0 on its way to 3g.40gb×2; GPU 1 there already.
	flying := ready.DeepCopy()
	flying.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}, {Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}
	for name, tc := range map[string]struct {
		nml      *v1alpha1.NodeMigLayout
		rules    string
		wantExit int
		wantOut  string
	}{
		"a GPU its rule cannot configure": {ready, "[{gpuIndices: [0], profiles: {3g.40gb: 3}}, {gpuIndices: [1], profiles: {7g.80gb: 1}}]", 3,
			"gpu-0  A100-SXM4-80GB: cannot be configured, left as it is: "},
		"a change in flight no rule asks for any more": {flying, "[{gpuIndices: [1], profiles: {7g.80gb: 1}}]", 2,
			"gpu-0  A100-SXM4-80GB: no rule matches: left as it is (7g.80gb@0); cancels the change in flight to 3g.40gb@0,3g.40gb@4\n"},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), tc.nml},
				"plan", "--exit-code", "-f", staticMigLayoutFile(t, "halves", tc.rules))
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("plan lacks %q:\n%s", tc.wantOut, out)
			}
			code := exitStatus(t, err)
			if code != tc.wantExit {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.wantExit, out)
			}
		})
	}
}
