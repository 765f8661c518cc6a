package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestHandedOverNodeCountedInItsNewMigLayoutsStatus: n1 was relabelled
// from the Auto MigLayout a's pool to b's (maxGPUs 1) while a's change there
// is under way: the change holds b's only slot, so b's status counts it as
// changing, and a's, which selects no node any more, does not.
func TestHandedOverNodeCountedInItsNewMigLayoutsStatus(t *testing.T) {
	in := handedOver(v1alpha1.PhaseRepartitioning)
	snap := AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0)
	res, err := planner.Plan(t.Context(), snap)
	if err != nil {
		t.Fatal(err)
	}
	st := AutoStatuses(in, snap, &res)
	if st["b"].ChangedGPUs != 1 || st["a"].ChangedGPUs != 0 {
		t.Errorf("changedGPUs: a %d (selects no node), b %d (its slot taken by n1's change); want a 0, b 1", st["a"].ChangedGPUs, st["b"].ChangedGPUs)
	}
}

// TestPodWaitingForHandedOverNodeIsToldSo: a pod only the handed-over n1
// can take is told it waits for a node that cannot be changed now, among
// the reasons of which is a node its MigLayout has not adopted yet.
func TestPodWaitingForHandedOverNodeIsToldSo(t *testing.T) {
	a := autoMigLayout("a", nil)
	b := autoMigLayout("b", nil)
	n1 := autoNML("n1", a, a100(0).layout("7g.80gb@0"))
	pod := autoPod("p", h0(), "c")
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"}
	in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{*a, *b},
		Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "b", "kubernetes.io/hostname": "n1"}),
			*node("n2", map[string]string{"pool": "b", "kubernetes.io/hostname": "n2"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": n1, "n2": autoNML("n2", b, a100(0).layout("7g.80gb@0"))},
		Pods:           []corev1.Pod{*pod}, Claims: claimsOf(autoClaim("c", profileSelector("1g.10gb"))),
		Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
	res, err := planner.Plan(t.Context(), AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0))
	if err != nil {
		t.Fatal(err)
	}
	if why := res.Unservable["ns/p"]; why != planner.WaitsForLostNode || !strings.Contains(why, "has not adopted them yet") {
		t.Errorf("the pod is told %q; want %s, naming a node not adopted yet", why, "WaitsForLostNode")
	}
}
