package main

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanMaxNodesChangingJustReached: spec.maxNodesChanging equal to the
// number of nodes that would change lets them all change at once: plan says
// nothing of nodes waiting their turn; one less, and it does.
func TestPlanMaxNodesChangingJustReached(t *testing.T) {
	var objs []client.Object
	for _, n := range []string{"gpu-a", "gpu-b", "gpu-c"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}})
	}
	for max, wait := range map[int]bool{2: true, 3: false, 4: false} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			rules := fmt.Sprintf("[{profiles: {3g.40gb: 2}}]\n  maxNodesChanging: %d", max)
			out, _, err := runWith(t, objs, "plan", "-f", staticMigLayoutFile(t, "rollout", rules))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Summary: 3 GPUs would change on 3 nodes") {
				t.Fatalf("plan does not change the 3 nodes:\n%s", out)
			}
			if got := strings.Contains(out, "spec.maxNodesChanging"); got != wait {
				t.Errorf("maxNodesChanging %d, 3 nodes changing: plan tells of nodes waiting their turn: %v, want %v:\n%s", max, got, wait, out)
			}
		})
	}
}
