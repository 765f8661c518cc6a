package controller

import (
	"context"
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPlansOnceNodeListsRequestedResource: a pod that asks for a device
// plugin's resource (example.com/nic) beside a MIG claim is not servable
// while no Auto node lists that resource at all. Once the device plugin
// registers on n1 (allocatable gains example.com/nic), the node update wakes
// the planner and the batch key changes with it (whether a node lists a
// requested resource at all is not room), so the pod is planned at once, not
// at the 20-minute refresh.
func TestPlansOnceNodeListsRequestedResource(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := eightCPUs(node("n1", map[string]string{"pool": "auto"}))
	p1 := cpus(autoPod("p1", h0(), "c1"), "1")
	p1.Spec.Containers[0].Resources.Requests["example.com/nic"] = resource.MustParse("1")
	h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("1g.10gb")), p1)
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Fatalf("spec %v before the device plugin registered", got)
	}
	h.setAllocatable(t, "n1", func(a corev1.ResourceList) { a["example.com/nic"] = resource.MustParse("2") })
	if got := h.specOf("n1")[0]; got == "" || got == "7g.80gb@0" {
		t.Errorf("n1's spec %q after the device plugin registered on it: p1 not planned (events %q)", got, h.events())
	}
}

// TestPlansOnceDevicePluginLeaves: a pod asking for nvidia.com/mig-1g.10gb,
// which a DeviceClass backs, is left to the device plugin while n1 lists
// that resource as allocatable (ServedByDevicePlugin). When the device
// plugin goes (a move from the device plugin to DRA), the node update wakes
// the planner and the batch key changes, so the pod is planned at once.
func TestPlansOnceDevicePluginLeaves(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mig-1g"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/mig-1g.10gb"),
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].profile == '1g.10gb'"}}}}}
	n1 := eightCPUs(node("n1", map[string]string{"pool": "auto"}))
	n1.Status.Allocatable["nvidia.com/mig-1g.10gb"] = resource.MustParse("7")
	p1 := cpus(autoPod("p1", h0()), "1")
	p1.Spec.Containers[0].Resources.Requests["nvidia.com/mig-1g.10gb"] = resource.MustParse("1")
	h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("7g.80gb@0")), class, p1)
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Fatalf("spec %v while the device plugin serves the resource", got)
	}
	h.setAllocatable(t, "n1", func(a corev1.ResourceList) { delete(a, "nvidia.com/mig-1g.10gb") })
	if got := h.specOf("n1")[0]; got == "" || got == "7g.80gb@0" {
		t.Errorf("n1's spec %q after the device plugin left: p1 not planned (events %q)", got, h.events())
	}
}

// TestBoundPodResizedDownWakesPlanner: p1 (4 CPUs, a 1g.10gb) waits for
// room on n1 (8 CPUs) where a running pod takes 6. That pod is resized in
// place down to 2 CPUs (spec and status): the update wakes the planner,
// which plans p1 in the room freed.
func TestBoundPodResizedDownWakesPlanner(t *testing.T) {
	h := busyN1(t)
	var old corev1.Pod
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "busy"}, &old); err != nil {
		t.Fatal(err)
	}
	resized := old.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	resized.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	if err := h.c.Update(context.Background(), resized); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Status().Update(context.Background(), resized); err != nil {
		t.Fatal(err)
	}
	if !h.a.boundPodEvents().Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: &old, ObjectNew: resized}) {
		t.Error("a running pod on an Auto node resized down does not wake the planner")
	}
	// Resized again with the same requests (a status write): no wake.
	if h.a.boundPodEvents().Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: resized, ObjectNew: resized.DeepCopy()}) {
		t.Error("a bound pod's update that changes no request wakes the planner")
	}
	h.now = h.now.Add(time.Second)
	h.settle()
	if got := h.specOf("n1")[0]; got == "" || got == "7g.80gb@0" {
		t.Errorf("n1's spec %q after the resize: p1 not planned (events %q)", got, h.events())
	}
}

// setAllocatable edits the allocatable resources of node name through the
// API server, as a kubelet does when a device plugin registers or leaves,
// checks that the update wakes the planner, and lets a second pass.
func (h *autoCluster) setAllocatable(t *testing.T, name string, edit func(corev1.ResourceList)) {
	t.Helper()
	var n corev1.Node
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	old := n.DeepCopy()
	edit(n.Status.Allocatable)
	if err := h.c.Status().Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	if !h.a.nodeChangeMatters(old, &n) {
		t.Fatalf("the change of %s's allocatable resources does not wake the planner", name)
	}
	h.now = h.now.Add(time.Second)
	h.settle()
}

// TestAllocatedClaimLabelsWakeThePlanner: a pending pod one of whose
// claims is allocated on devices of nodes with rack=b (planner.Pod
// AllocatedOn) can only go to such a node: relabelling a node into or out
// of rack b changes the plan.
func TestAllocatedClaimLabelsWakeThePlanner(t *testing.T) {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	in := AutoInputs{Driver: migslices.DefaultDriverName}
	a := &AutoPlanner{labelKeys: feasibilityLabelKeys(in, planner.Snapshot{Pending: []planner.Pod{{Pod: pod, AllocatedOn: []*corev1.NodeSelector{sel}}}})}
	before := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "a"}}}
	after := before.DeepCopy()
	after.Labels["rack"] = "b"
	if !a.nodeChangeMatters(before, after) {
		t.Errorf("relabelling n1 into the node selector of a pending pod's allocated claim does not wake the planner (label keys %v)", a.labelKeys)
	}
}
