package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanStaticCountsOnlyTheNodesThatChange: the summary counts the nodes
// where some GPU changes, not every node selected, and so does the
// spec.maxNodesChanging note: with one of two nodes changing, a bound of 1
// holds nothing back.
func TestPlanStaticCountsOnlyTheNodesThatChange(t *testing.T) {
	objs := []client.Object{node("gpu-a", map[string]string{"pool": "a"}), node("gpu-b", map[string]string{"pool": "a"}),
		reportedA100("gpu-a", "7g.80gb@0"), reportedA100("gpu-b", "3g.40gb@0,3g.40gb@4")}
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
