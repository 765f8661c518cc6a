package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoTellsEachMigLayoutItsOwnNodes: of the one Auto plan of two
// Auto MigLayouts of a file, each is told what happens on its own nodes
// only: pool-a the cancel of node-a's reclaim in flight (its free 1g.10gb
// devices go to ml/small as they are), pool-b node-b's change for
// ml/whole.
func TestPlanAutoTellsEachMigLayoutItsOwnNodes(t *testing.T) {
	h100 := func(name, want, actual string, phase v1alpha1.GPUPhase) *v1alpha1.NodeMigLayout {
		nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
				MIGEnabled: true, MIGPending: true, Layout: actual, Phase: phase}}}}
		if want != "" {
			nml.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: want, Reason: "gives the GPU, idle for 5m0s, back whole"}}
		}
		return nml
	}
	small, smallPod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
	whole, wholePod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1001)
	objs := []client.Object{migClass(), small, smallPod, whole, wholePod,
		node("node-a", map[string]string{"pool": "a"}), h100("node-a", "7g.80gb@0", "1g.10gb@5,1g.10gb@6", v1alpha1.PhaseDraining),
		node("node-b", map[string]string{"pool": "b"}), h100("node-b", "", "", v1alpha1.PhaseReady)}
	a, b := planOfEachPool(t, objs, "")
	for _, tc := range []struct {
		name, plan     string
		want, wantNone []string
	}{
		{"pool-a", a, []string{"cancels giving the GPU back", "ml/small fits existing free devices on node-a", "Summary: 1 GPU would change"},
			[]string{"node-b", "serves:   ml/whole"}},
		{"pool-b", b, []string{"node-b\n  gpu-0  MIG on, no device -> 7g.80gb@0", "serves:   ml/whole", "Summary: 1 GPU would change"},
			[]string{"node-a", "cancels", "fits existing free devices"}},
	} {
		for _, s := range tc.want {
			if !strings.Contains(tc.plan, s) {
				t.Errorf("the plan of %s lacks %q:\n%s", tc.name, s, tc.plan)
			}
		}
		for _, s := range tc.wantNone {
			if strings.Contains(tc.plan, s) {
				t.Errorf("the plan of %s says %q, of the other MigLayout's node:\n%s", tc.name, s, tc.plan)
			}
		}
	}
}
