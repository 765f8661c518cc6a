package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticReachedSpecIsNoChangeInFlight: a GPU whose layout is the
// one its node's spec asks for has no change in flight: new rules that
// leave it out, or that change it, neither cancel nor replace anything.
func TestPlanStaticReachedSpecIsNoChangeInFlight(t *testing.T) {
	gpu := func(i int32) v1alpha1.GPUStatus {
		return v1alpha1.GPUStatus{Index: i, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}
	}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "halves", GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}, {Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{gpu(0), gpu(1)}}}
	// GPU 0: no rule; GPU 1: split in halves.
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "halves", "[{gpuIndices: [1], profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gpu-0  A100-SXM4-80GB: no rule matches: left as it is (7g.80gb@0)\n",
		"gpu-1  A100-SXM4-80GB: 7g.80gb@0 -> 3g.40gb@0,3g.40gb@4\n",
		"Summary: 1 GPU would change on 1 node.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "in flight") {
		t.Errorf("plan tells of a change in flight where each GPU has the layout its spec asks for:\n%s", out)
	}
}
