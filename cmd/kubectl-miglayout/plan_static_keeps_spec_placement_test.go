package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticKeepsThePlacementTheSpecHolds: as the controller, plan
// fits the rule's counts to the layout the node's spec asks for now (a
// change in flight there is kept, not moved): a 1g.10gb the spec places at
// slice 2 stays there, where a fit from scratch places it at slice 6.
func TestPlanStaticKeepsThePlacementTheSpecHolds(t *testing.T) {
	nml := reportedA100("gpu-a", "")
	nml.Spec = v1alpha1.NodeMigLayoutSpec{MigLayout: "one", GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "1g.10gb@2"}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "-f", staticMigLayoutFile(t, "one", "[{profiles: {1g.10gb: 1}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "gpu-0  A100-SXM4-80GB: MIG on, no device -> 1g.10gb@2\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
}
