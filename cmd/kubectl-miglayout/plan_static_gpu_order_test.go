package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticListsGPUsByIndex: a node's GPUs are planned in index order,
// whatever the order of its agent's report.
func TestPlanStaticListsGPUsByIndex(t *testing.T) {
	gpu := func(i int32) v1alpha1.GPUStatus {
		return v1alpha1.GPUStatus{Index: i, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}
	}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{gpu(2), gpu(0), gpu(1)}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "gpu-") && f[0] != "gpu-a" {
			got = append(got, f[0])
		}
	}
	if want := "gpu-0 gpu-1 gpu-2"; strings.Join(got, " ") != want {
		t.Errorf("GPUs planned in the order %q, want %q:\n%s", strings.Join(got, " "), want, out)
	}
}
