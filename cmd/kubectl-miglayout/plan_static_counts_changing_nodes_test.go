package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticCountsOnlyTheNodesThatChange: the summary counts the nodes
// where some GPU changes, not every node selected, and so does the
// spec.maxNodesChanging note: with one of two nodes changing, a bound of 1
// holds nothing back.
func TestPlanStaticCountsOnlyTheNodesThatChange(t *testing.T) {
	nml := func(name, layout string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: layout, Phase: v1alpha1.PhaseReady}}}}
	}
	objs := []client.Object{node("gpu-a", map[string]string{"pool": "a"}), node("gpu-b", map[string]string{"pool": "a"}),
		nml("gpu-a", "7g.80gb@0"), nml("gpu-b", "3g.40gb@0,3g.40gb@4")}
	out, _, err := runWith(t, objs, "plan", "-f", manifestFile(t, `apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata: {name: halves}
spec:
  nodeSelector: {matchLabels: {pool: a}}
  maxNodesChanging: 1
  rules: [{profiles: {3g.40gb: 2}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Summary: 1 GPU would change on 1 node.\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
}
