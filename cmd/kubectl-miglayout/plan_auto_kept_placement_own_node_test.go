package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoTellsAKeptPlacementUnderItsNodesMigLayout: a placement the
// plan keeps for a waiting pod on one MigLayout's node is told under that
// MigLayout, not under another Auto MigLayout of the file.
func TestPlanAutoTellsAKeptPlacementUnderItsNodesMigLayout(t *testing.T) {
	h100 := func(index int32, layout, inUse string) v1alpha1.GPUStatus {
		return v1alpha1.GPUStatus{Index: index, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Layout: layout, InUse: inUse, Phase: v1alpha1.PhaseReady}
	}
	// As in TestPlanAuto: whole takes node-a's empty GPU 0, trainer waits
	// with GPU 1's left half kept for it. node-b's GPU is all in use.
	nodeA := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{h100(0, "", ""), h100(1, "1g.10gb@6", "1g.10gb@6")}}}
	nodeB := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "node-b"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{h100(0, "7g.80gb@0", "7g.80gb@0")}}}
	trainer, trainerPod := pending("trainer", "half-gpu", "device.attributes['mig.miglayout.io'].profile == '3g.40gb'", 1000)
	whole, wholePod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1001)
	objs := []client.Object{migClass(), trainer, trainerPod, whole, wholePod,
		node("node-a", map[string]string{"pool": "a"}), nodeA, node("node-b", map[string]string{"pool": "b"}), nodeB}
	a, b := planOfEachPool(t, objs, "")
	const kept = "ml/trainer: memory slices 0-3 of node-a/gpu-1 (where a 3g.40gb goes) kept for it"
	if !strings.Contains(a, kept) {
		t.Errorf("the plan of pool-a lacks %q:\n%s", kept, a)
	}
	if strings.Contains(b, "kept for it") {
		t.Errorf("the plan of pool-b tells of a placement kept on pool-a's node:\n%s", b)
	}
}
