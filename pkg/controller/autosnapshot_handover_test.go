package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestHandedOverNodeCountsTowardTheNewMigLayoutsLimit: n1 was relabelled
// from MigLayout a's pool to b's (maxGPUs 1) while a's change on its GPU 0
// is under way; b's reconciler keeps that change when it adopts the node.
// Until then n1's NodeMigLayout is still a's, yet the change counts toward
// b's limit: b plans nothing on n2 while it is under way, and plans there
// once n1's GPU is Ready.
func TestHandedOverNodeCountsTowardTheNewMigLayoutsLimit(t *testing.T) {
	for name, c := range map[string]struct {
		phase v1alpha1.GPUPhase
		want  int // changes b plans
	}{
		"a's change under way": {phase: v1alpha1.PhaseRepartitioning, want: 0},
		"a's change done":      {phase: v1alpha1.PhaseReady, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			in := handedOver(c.phase)
			res, err := planner.Plan(t.Context(), AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changes) != c.want {
				t.Errorf("b plans %+v, want %d change(s)", res.Changes, c.want)
			}
			for _, ch := range res.Changes {
				if ch.Node != "n2" {
					t.Errorf("b plans on %s, which it has not adopted yet", ch.Node)
				}
			}
		})
	}
}

// handedOver is a cluster where n1 was relabelled from the Auto MigLayout
// a's pool to b's (maxGPUs 1) while a's change on its GPU 0 (to two
// 3g.40gb) is in phase (Ready: done), and a pod asks for a 1g.10gb.
func handedOver(phase v1alpha1.GPUPhase) AutoInputs {
	a := autoMigLayout("a", nil)
	b := autoMigLayout("b", &v1alpha1.AutoPolicy{MaxGPUs: 1, MaxGPUsPerNode: 1})
	layout := "7g.80gb@0"
	if phase == v1alpha1.PhaseReady {
		layout = "3g.40gb@0,3g.40gb@4"
	}
	n1 := autoNML("n1", a, a100(0).layout(layout).phase(phase, string(phase), ""))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", "planned by a")}
	return AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{*a, *b},
		Nodes:          []corev1.Node{*node("n1", map[string]string{"pool": "b"}), *node("n2", map[string]string{"pool": "b"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": n1, "n2": autoNML("n2", b, a100(0).layout("7g.80gb@0"))},
		Pods:           []corev1.Pod{*autoPod("p", h0(), "c")}, Claims: claimsOf(autoClaim("c", profileSelector("1g.10gb"))),
		Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
}
