package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestPlanAutoPodWaitsForNodeResources: a pending pod whose CPU request
// does not fit beside the pods bound to the only Auto node now is told as
// waiting for room (it is planned once the node has some), not as one no
// Auto node can serve.
func TestPlanAutoPodWaitsForNodeResources(t *testing.T) {
	n := node("auto-node", map[string]string{"pool": "auto"})
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}}}}
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	// The node's whole CPU is taken by a running pod.
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "busy"},
		Spec:   corev1.PodSpec{NodeName: "auto-node", Containers: []corev1.Container{{Name: "c", Image: "x", Resources: cpu("1")}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
	pod.Spec.Containers[0].Resources = cpu("500m")
	out, _, err := runWith(t, []client.Object{n, nml, migClass(), running, claim, pod}, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "Pods no GPU can take now (devices in use, the limits on GPUs changed at once, a node that cannot be changed now: its agent lost, its MigLayout paused, or not adopted yet; or a claim they share not allocated yet):\n  ml/whole: " + planner.WaitsForNodeResources + "\n"
	if !strings.Contains(out, want) || strings.Contains(out, "Pods no Auto node can serve") {
		t.Errorf("plan does not tell ml/whole as waiting for room on the node (%q):\n%s", want, out)
	}
}

// TestPlanAutoPodWaitsForASharedClaim: of two pods sharing a claim, one
// asking for one more of its own, the plan serves one (the larger, ml/guest)
// and the other waits for the shared claim's allocation (it is planned on
// that node then): told as waiting, as the controller tells it, not as one
// no Auto node can serve.
func TestPlanAutoPodWaitsForASharedClaim(t *testing.T) {
	n := node("auto-node", map[string]string{"pool": "auto"})
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}}}}
	shared, host := pending("host", "shared", "device.attributes['mig.miglayout.io'].profile == '3g.40gb'", 1000)
	own, guest := pending("guest", "own", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1001)
	guest.Spec.ResourceClaims = append(guest.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To("shared")})
	out, _, err := runWith(t, []client.Object{n, nml, migClass(), shared, host, own, guest}, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "serves:   ml/guest\n") || !strings.Contains(out, "  ml/host: "+planner.WaitsForSharedClaim+"\n") || strings.Contains(out, "Pods no Auto node can serve") {
		t.Errorf("plan does not serve ml/guest and tell ml/host as waiting for the claim they share:\n%s", out)
	}
}
