package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// cpus sets the pod to one container requesting n CPUs.
func cpus(p *corev1.Pod, n string) *corev1.Pod {
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}}}}
	return p
}

// eightCPUs gives the node 8 allocatable CPUs and 110 pods.
func eightCPUs(n *corev1.Node) *corev1.Node {
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	return n
}

// TestNodeRequests: what the pods bound to a node request is summed per
// node and priority, with their number, as kube-scheduler counts it: a pod
// that is done counts no longer, one being deleted still does, an unbound
// one on no node unless a preemption nominated it there (and it is no Auto
// demand, which is planned with its room: one asking only for a device
// plugin's resource counts); nodes that cannot be Auto nodes are not summed.
func TestNodeRequests(t *testing.T) {
	withCPU := func(p corev1.Pod, cpu string) corev1.Pod {
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	pending := withCPU(runningPod("pending", corev1.PodPending, false), "8")
	pending.Spec.NodeName = ""
	pods := []corev1.Pod{
		withCPU(runningPod("r1", corev1.PodRunning, false), "2"),
		withCPU(runningPod("r2", corev1.PodRunning, false), "500m"),
		runningPod("no-requests", corev1.PodRunning, false),
		withCPU(runningPod("terminating", corev1.PodRunning, true), "1"),
		withCPU(runningPod("succeeded", corev1.PodSucceeded, false), "16"),
		withCPU(runningPod("failed", corev1.PodFailed, false), "16"),
		pending,
	}
	high := withCPU(runningPod("high", corev1.PodRunning, false), "1")
	high.Spec.Priority = ptr.To[int32](1000)
	elsewhere := withCPU(runningPod("elsewhere", corev1.PodRunning, false), "4")
	elsewhere.Spec.NodeName = "cpu-only"
	nominated := withCPU(runningPod("nominated", corev1.PodPending, false), "2")
	nominated.Spec.NodeName, nominated.Status.NominatedNodeName, nominated.Spec.Priority = "", "a", ptr.To[int32](1000)
	nominatedDemand := nominated
	nominatedDemand.Name = "nominated-with-claim"
	nominatedDemand.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
	// Asks for a device plugin's resource only (no DeviceClass backs it):
	// no Auto demand, its room is kept.
	nominatedPlugin := withCPU(runningPod("nominated-device-plugin", corev1.PodPending, false), "1")
	nominatedPlugin.Spec.NodeName, nominatedPlugin.Status.NominatedNodeName = "", "a"
	nominatedPlugin.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
	// Its pod-level request resized in place from 6 CPUs to 2, not done
	// yet: kube-scheduler counts the 6 the kubelet still gives it.
	resized := runningPod("resized", corev1.PodRunning, false)
	resized.Spec.Containers = []corev1.Container{{Name: "c"}}
	resized.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	resized.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
	pods = append(pods, high, elsewhere, nominated, nominatedDemand, nominatedPlugin, resized)
	demand := func(p *corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 }
	got := map[string][]string{}
	for node, l := range nodeRequests(pods, func(node string) bool { return node != "cpu-only" }, demand) {
		for _, pr := range l {
			got[node] = append(got[node], fmt.Sprintf("%d: %s", pr.Priority, resourcesText(pr.Requests)))
		}
	}
	if diff := cmp.Diff(map[string][]string{"a": {"0: cpu=10500m,example.com/fpga=1,pods=6", "1000: cpu=3,pods=2"}}, got); diff != "" {
		t.Errorf("requested per node (-want +got):\n%s", diff)
	}
}

// TestNominatedPodKeepsRoomUnserved: p, nominated to n1 by a preemption,
// asks for a 7g.80gb that n1's GPUs, each holding a device in use, cannot
// take now, and for 6 of n1's 8 CPUs. kube-scheduler keeps those CPUs for
// p from pods of its priority or lower, so q, asking for a 1g.10gb and 4
// CPUs, would not be bound to n1: no device is made there for q.
func TestNominatedPodKeepsRoomUnserved(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := eightCPUs(node("n1", map[string]string{"pool": "auto"}))
	p := autoPod("p", h0(), "cp")
	p.Spec.Priority, p.Status.NominatedNodeName = ptr.To[int32](1000), "n1"
	h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("1g.10gb@0").inUse("1g.10gb@0"), a100(1).layout("4g.40gb@0").inUse("4g.40gb@0")),
		autoClaim("cp", profileSelector("7g.80gb")), cpus(p, "6"),
		autoClaim("cq", profileSelector("1g.10gb")), cpus(autoPod("q", h0(), "cq"), "4"))
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v: changed for q, whose CPUs kube-scheduler keeps for the nominated p", got)
	}
}

// busyN1 is n1 with a whole GPU free but 8 CPUs, 6 of which a running pod
// without claims ("busy") requests, and a pending pod p1 asking for a
// 1g.10gb and 4 CPUs, planned once: no device is made for p1.
func busyN1(t *testing.T) *autoCluster {
	t.Helper()
	ml := autoMigLayout("auto", nil)
	n1 := eightCPUs(node("n1", map[string]string{"pool": "auto"}))
	busy := runningPod("busy", corev1.PodRunning, false)
	busy.Spec.NodeName = "n1"
	h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		cpus(&busy, "6"), autoClaim("c1", profileSelector("1g.10gb")), cpus(autoPod("p1", h0(), "c1"), "4"))
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Fatalf("spec %v: a device made where the pod's CPUs do not fit", got)
	}
	return h
}

// TestPendingPodWaitsForNodeResources: n1 has a whole GPU free but 8 CPUs,
// 6 of which a running pod without claims requests. A pending pod asking
// for a 1g.10gb and 4 CPUs could never be bound there now: no device is
// made for it, it hears that it waits for the node's resources, and the
// MigLayout counts it as waiting for room. Once the running pod ends, the
// planner is woken (though that pod has no claim) and the device is made.
func TestPendingPodWaitsForNodeResources(t *testing.T) {
	h := busyN1(t)
	events := strings.Join(h.events(), "\n")
	if !strings.Contains(events, EventWaitingForCapacity) || !strings.Contains(events, planner.WaitsForNodeResources) {
		t.Errorf("events %q, want p1 told it waits for the node's resources", events)
	}
	if st := h.autoStatus(); st == nil || st.WaitingForRoomPods != 1 || st.NotServablePods != 0 {
		t.Errorf("Auto status %+v, want p1 counted as waiting for room", st)
	}

	var p corev1.Pod
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "busy"}, &p); err != nil {
		t.Fatal(err)
	}
	if h.a.endsOnAutoNode(&p) {
		t.Error("a running pod's update wakes the planner")
	}
	p.Status.Phase = corev1.PodSucceeded
	if !h.a.endsOnAutoNode(&p) {
		t.Error("a pod that ends on an Auto node does not wake the planner")
	}
	other := p.DeepCopy()
	other.Spec.NodeName = "elsewhere"
	if h.a.endsOnAutoNode(other) {
		t.Error("a pod that ends on a node of no Auto MigLayout wakes the planner")
	}
	// Force-deleted (or deleted by the garbage collector), a pod reaches
	// the informer as last stored: running, no deletion timestamp.
	filter := h.a.boundPodEvents()
	running := p.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	if filter.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: running, ObjectNew: running}) {
		t.Error("a running pod's update passes the bound pods' filter")
	}
	if !filter.Delete(event.TypedDeleteEvent[*corev1.Pod]{Object: running}) {
		t.Error("a running pod deleted at once from an Auto node does not wake the planner")
	}
	runningElsewhere := running.DeepCopy()
	runningElsewhere.Spec.NodeName = "elsewhere"
	if filter.Delete(event.TypedDeleteEvent[*corev1.Pod]{Object: runningElsewhere}) {
		t.Error("a pod without claims deleted from a node of no Auto MigLayout wakes the planner")
	}
	if err := h.c.Status().Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Second)
	h.settle()
	if diff := cmp.Diff(map[int32]string{0: "1g.10gb@6"}, h.specOf("n1")); diff != "" {
		t.Errorf("spec once the busy pod ended (-want +got):\n%s", diff)
	}
}

// TestNominatedPodKeepsRoom: a pod of 6 CPUs and no claim that a preemption
// nominated to n1 (8 CPUs) waits there for its victims to leave, and
// kube-scheduler keeps its room: a pending pod asking for a 1g.10gb and 4
// CPUs is planned on n2, not on n1, where kube-scheduler would not bind it.
// A nomination of such a pod, and its end, wake the planner.
func TestNominatedPodKeepsRoom(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	preemptor := runningPod("preemptor", corev1.PodPending, false)
	preemptor.Spec.NodeName, preemptor.Status.NominatedNodeName, preemptor.Spec.Priority = "", "n1", ptr.To[int32](1000)
	h := newAutoCluster(t, ml,
		eightCPUs(node("n1", map[string]string{"pool": "auto"})), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		eightCPUs(node("n2", map[string]string{"pool": "auto"})), autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		cpus(&preemptor, "6"), autoClaim("c1", profileSelector("1g.10gb")), cpus(autoPod("p1", h0(), "c1"), "4"))
	h.settle()
	if got := h.specOf("n1")[0]; got != "" && got != "7g.80gb@0" {
		t.Errorf("n1 changed to %q for a pod whose CPUs the nominated pod keeps", got)
	}
	if got := h.specOf("n2")[0]; got != "1g.10gb@6" {
		t.Errorf("n2's desired layout %q, want 1g.10gb@6", got)
	}
	if !h.a.nominatedToAutoNode(&preemptor) {
		t.Error("a pod nominated to an Auto node does not wake the planner")
	}
	elsewhere := preemptor.DeepCopy()
	elsewhere.Status.NominatedNodeName = "cpu-only"
	if h.a.nominatedToAutoNode(elsewhere) {
		t.Error("a pod nominated to a node of no Auto MigLayout wakes the planner")
	}
}

// TestRoomInInputKey: the pods bound to a node change the plan's inputs
// only where that changes how many pending pods fit the node's room: a pod
// of 1 CPU going leaves two 4-CPU pods still without room (no new plan), a
// second one going makes room for one of them, and the last for both (a
// new plan each time).
func TestRoomInInputKey(t *testing.T) {
	n1 := node("n1", map[string]string{"pool": "auto"})
	n1.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	pending := autoPod("p1", h0(), "c1")
	pending.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}
	key := func(used ...string) string {
		var prs []planner.PriorityRequests
		for _, cpu := range used {
			prs = append(prs, planner.PriorityRequests{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}})
		}
		second := pending.DeepCopy()
		second.Name = "p2"
		snap := planner.Snapshot{Nodes: []planner.Node{{Node: n1, Requested: prs}}, Pending: []planner.Pod{{Pod: pending}, {Pod: second}}}
		return inputKey(AutoInputs{}, snap)
	}
	full, lessOne, roomForOne, roomForTwo := key("6", "1"), key("6"), key("2"), key("0")
	if full != lessOne {
		t.Error("the key changed though the pending pods still have no room")
	}
	if full == roomForOne {
		t.Error("the key did not change though a pending pod has room now")
	}
	if roomForOne == roomForTwo {
		t.Error("the key did not change though both pending pods have room now")
	}
}

// TestSnapshotKeepsRoomOfNominatedDevicePluginPod: a pod a preemption
// nominated to n1 that asks for a device plugin's resource no DeviceClass
// backs is no Auto demand: its requests count in n1's room, where they
// were counted nowhere. One asking for a resource a DeviceClass backs is
// demand, planned with its room, and does not count.
func TestSnapshotKeepsRoomOfNominatedDevicePluginPod(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	one := resource.MustParse("1")
	nominated := func(name string, extended corev1.ResourceName) corev1.Pod {
		p := runningPod(name, corev1.PodPending, false)
		p.Spec.NodeName, p.Status.NominatedNodeName = "", "n1"
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: one, extended: one},
			Limits:   corev1.ResourceList{extended: one}}}}
		return p
	}
	backed := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mig-1g"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/mig-1g.10gb")}}
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml}, Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "auto"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": autoNML("n1", ml, a100(0).layout("7g.80gb@0"))},
		Pods:           []corev1.Pod{nominated("fpga", "example.com/fpga"), nominated("mig", "nvidia.com/mig-1g.10gb")},
		Classes:        []*resourceapi.DeviceClass{backed}, Driver: migClassName}
	snap := BuildSnapshot(in, mig.DefaultCatalog())
	if len(snap.Nodes) != 1 {
		t.Fatalf("%d nodes, want n1", len(snap.Nodes))
	}
	var got []string
	for _, pr := range snap.Nodes[0].Requested {
		got = append(got, resourcesText(pr.Requests))
	}
	if diff := cmp.Diff([]string{"cpu=1,example.com/fpga=1,pods=1"}, got); diff != "" {
		t.Errorf("n1's requested (-want +got):\n%s", diff)
	}
}

// TestNominatedPodOfAnotherDriverKeepsRoom: as TestNominatedPodKeepsRoom
// with the nominated pod asking, through a ResourceClaim, for a NIC of
// another driver only, or through one of miglayout's DeviceClasses for a
// device its claim already holds: no Auto demand, yet kube-scheduler keeps
// its room on n1. Its 6 CPUs are counted there (they were counted nowhere,
// and n1 was repartitioned for a pod kube-scheduler would not bind there).
func TestNominatedPodOfAnotherDriverKeepsRoom(t *testing.T) {
	nicClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == 'nic.example.com'"}}}}}
	nic := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nic"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: nicClass.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	held := autoClaim("held", profileSelector("1g.10gb"))
	held.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: migClassName, Pool: "n2", Device: "gpu-0-mig-1g10gb-0-0"}}}}
	for name, claim := range map[string]string{"no claim": "", "a NIC claim": "nic", "an allocated MIG claim": "held"} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			n1 := eightCPUs(node("n1", map[string]string{"pool": "auto"}))
			q := autoPod("q", h0())
			if claim != "" {
				q = autoPod("q", h0(), claim)
			}
			q.Spec.Priority, q.Status.NominatedNodeName = ptr.To(int32(1000)), "n1"
			h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("7g.80gb@0")), nicClass, nic, held, cpus(q, "6"),
				autoClaim("c1", profileSelector("1g.10gb")), cpus(autoPod("p1", h0(), "c1"), "4"))
			h.settle()
			if got := h.specOf("n1"); len(got) != 0 && got[0] != "7g.80gb@0" {
				t.Errorf("n1 changed to %v for p1, whose CPUs kube-scheduler keeps for the nominated q", got)
			}
		})
	}
}
