package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestNodeHeldByInvalidSelectorIsNotHandedOver: n1 is held by the Static
// MigLayout b, whose selector no longer parses: the reconciler reports n1
// as a conflict of the Auto MigLayout a and never adopts it
// (HeldByInvalidSelectors). b's GPU there, Failed on its input, must not
// take a's only slot (maxGPUs 1) for good: a plans its change on n2.
func TestNodeHeldByInvalidSelectorIsNotHandedOver(t *testing.T) {
	a := autoMigLayout("a", &v1alpha1.AutoPolicy{MaxGPUs: 1, MaxGPUsPerNode: 1})
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	n1 := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
		status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidLayout, "refused")).build(), b)
	in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{*a, *b},
		Nodes:          []corev1.Node{*node("n1", map[string]string{"pool": "a"}), *node("n2", map[string]string{"pool": "a"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": n1, "n2": autoNML("n2", a, a100(0).layout("7g.80gb@0"))},
		Pods:           []corev1.Pod{*autoPod("p", h0(), "c")}, Claims: claimsOf(autoClaim("c", profileSelector("1g.10gb"))),
		Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
	res, err := planner.Plan(t.Context(), AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 {
		t.Errorf("a plans %+v, unservable %v; want its change on n2 (n1 is b's, which a never adopts)", res.Changes, res.Unservable)
	}
}

// TestPodNominatedToHandedOverNodeIsNoDemand: a pod kube-scheduler
// nominated to n1 (a preemption there), whose NodeMigLayout the Static
// MigLayout b still controls while the Auto MigLayout a now selects it
// alone, is no Auto demand: it runs on n1's devices once its victims go.
func TestPodNominatedToHandedOverNodeIsNoDemand(t *testing.T) {
	a := autoMigLayout("a", nil)
	b := staticMigLayout("b", "uid-b", "b")
	n1 := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "1g.10gb@0", "")).status(a100(0).layout("1g.10gb@0")).build(), b)
	pod := autoPod("p", h0(), "c")
	pod.Status.NominatedNodeName = "n1"
	in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{*a, *b},
		Nodes:          []corev1.Node{*node("n1", map[string]string{"pool": "a"}), *node("n2", map[string]string{"pool": "a"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": n1, "n2": autoNML("n2", a, a100(0).layout("7g.80gb@0"))},
		Pods:           []corev1.Pod{*pod}, Claims: claimsOf(autoClaim("c", profileSelector("1g.10gb"))),
		Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
	snap := AutoSnapshot(t.Context(), in, mig.DefaultCatalog(), h0(), 0)
	if len(snap.Pending) != 0 {
		res, _ := planner.Plan(t.Context(), snap)
		t.Errorf("pod nominated to n1 (b's NodeMigLayout) is Auto demand: %d pending; plan unservable %v", len(snap.Pending), res.Unservable)
	}
}
