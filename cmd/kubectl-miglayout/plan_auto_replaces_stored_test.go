package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoMigLayoutReplacesItsStoredSelf: an Auto MigLayout applied
// over the stored one of its name is planned in its place: the node the
// stored one selects and the new one does not is released, and no pod is
// planned onto it, so a pod only that node could serve now waits
// for room on the new one.
func TestPlanAutoMigLayoutReplacesItsStoredSelf(t *testing.T) {
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "on-demand", UID: "uid-on-demand"},
		Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto,
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "auto"}}}}
	h100 := func(layout, inUse string) []v1alpha1.GPUStatus {
		return []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Layout: layout, InUse: inUse, Phase: v1alpha1.PhaseReady}}
	}
	// The stored MigLayout's node, with a GPU free for any profile.
	old := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: "on-demand", UID: "uid-on-demand", Controller: ptr.To(true)}}},
		Spec:   v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: h100("", "")}}
	// The new selector's node, its GPU whole and in use.
	busy := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "new-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: h100("7g.80gb@0", "7g.80gb@0")}}
	claim, pod := pending("trainer", "half-gpu", "device.attributes['mig.miglayout.io'].profile == '3g.40gb'", 1000)
	objs := []client.Object{stored, migClass(), claim, pod,
		node("auto-node", map[string]string{"pool": "auto"}), old,
		node("new-node", map[string]string{"pool": "new"}), busy}
	out, _, err := runWith(t, objs, "plan", "-f", manifestFile(t, autoMigLayoutDoc("on-demand", "new")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"no longer selects auto-node: released",
		"Pods no GPU can take now",
		"\n  ml/trainer: ",
		"Summary: 0 GPUs would change",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
