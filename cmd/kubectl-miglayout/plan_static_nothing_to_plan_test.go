package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticSaysWhenANodeHasNothingToPlan: a selected node whose agent
// has reported but counts no GPU, and a node no MigLayout selected yet whose
// agent publishes no GPU, are each told as having nothing to plan, and
// neither is drawn as a node with GPUs.
func TestPlanStaticSaysWhenANodeHasNothingToPlan(t *testing.T) {
	// The agent reported (observedGeneration set) and NVML counts no GPU.
	empty := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1}}
	for name, tc := range map[string]struct {
		objs []client.Object
		want string
	}{
		"an agent that reports no GPU": {
			[]client.Object{node("gpu-a", map[string]string{"pool": "a"}), empty},
			"gpu-a: the miglayout agent reports no GPU on the node: nothing to plan\n",
		},
		"a node that publishes no GPU": {
			[]client.Object{node("gpu-a", map[string]string{"pool": "a"})},
			"gpu-a: no GPU published under mig.miglayout.io (no miglayout agent runs there, or its GPUs have MIG on and no device): nothing to plan\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, tc.objs, "plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("plan lacks %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "\ngpu-a\n") || strings.Contains(out, "gpu-a  (") {
				t.Errorf("plan draws gpu-a as a node with GPUs to plan, want only %q:\n%s", tc.want, out)
			}
		})
	}
}
