package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStatusShowsGPUsBlockedByTheController: a GPU the controller's row
// marks Blocked, which its agent reports Ready (the spec leaves it out), is
// shown Blocked, not Ready.
func TestStatusShowsGPUsBlockedByTheController(t *testing.T) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1", Phase: v1alpha1.PhaseBlocked,
			Message: `gpu-0: blocked`,
			GPUs:    []v1alpha1.GPURow{{Index: 0, Phase: v1alpha1.PhaseBlocked}}}}}}
	out, _, err := runWith(t, append(cluster(t), ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	node1, _, _ := strings.Cut(out, "gpu-node-2 ")
	var gpu0 string
	for _, l := range strings.Split(node1, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "gpu-0 ") {
			gpu0 = l
		}
	}
	if !strings.Contains(gpu0, " Blocked ") {
		t.Errorf("gpu-0 of gpu-node-1 shown %q, want the controller's phase Blocked:\n%s", gpu0, out)
	}
}
