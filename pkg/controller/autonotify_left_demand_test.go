package controller

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodLeavingDemandHearsItIsNoLongerPlanned: p1 was told a GPU is
// repartitioned for it; then its DeviceClass is deleted, so it no longer
// asks for a MIG device Auto mode makes while it still waits. The change
// made for it is cancelled, and p1 hears that it is no longer planned
// (its last event promised the repartition).
func TestPodLeavingDemandHearsItIsNoLongerPlanned(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if got := strings.Join(h.events(), "\n"); !strings.Contains(got, EventWaitingForRepartition) {
		t.Fatalf("p1 was not told of its repartition: %q", got)
	}
	if err := h.c.Delete(context.Background(), migDeviceClass()); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(3e9)
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Errorf("n1/gpu-0 -> %q, want the change for p1 cancelled", got)
	}
	var told []string
	for _, e := range h.events() {
		if strings.Contains(e, EventNoLongerPlanned) {
			told = append(told, e)
		}
	}
	if len(told) != 1 {
		t.Errorf("p1 heard %q, want one %s event", told, EventNoLongerPlanned)
	}
}

// TestWaitsForDevices: a pod that left the demand is told it is no longer
// planned only while it waits for devices: not once its claims are all
// allocated (kube-scheduler binds it), nor once it is bound.
func TestWaitsForDevices(t *testing.T) {
	c := autoClaim("c1", profileSelector("3g.40gb"))
	p := autoPod("p1", h0(), "c1")
	if waitsForDevices(p, claimsOf(c)) != true {
		t.Fatal("a pod whose claim is not allocated does not wait for devices")
	}
	c.Status.Allocation = allocationOn("n1", "gpu-0-mig-3g40gb-9-4")
	if waitsForDevices(p, claimsOf(c)) {
		t.Error("a pod whose claims are allocated waits for devices")
	}
	p.Spec.NodeName = "n1"
	c.Status.Allocation = nil
	if waitsForDevices(p, claimsOf(c)) {
		t.Error("a bound pod waits for devices")
	}
	p.Spec.NodeName = ""
	if !waitsForDevices(p, claimsOf()) {
		t.Error("a pod whose claim is missing does not wait for devices")
	}
	p.DeletionTimestamp = &metav1.Time{}
	if waitsForDevices(p, claimsOf(c)) {
		t.Error("a pod being deleted waits for devices")
	}
}

// TestPromised: a pod told a GPU is being repartitioned for it, or that
// capacity is kept for it, was promised something; one told nothing can
// serve it was not.
func TestPromised(t *testing.T) {
	for what, want := range map[string]bool{
		EventWaitingForRepartition + ": n1/gpu-0": true,
		EventWaitingForCapacity:                   true,
		EventNotServable:                          false,
	} {
		if got := promised(podEvent{what: what}); got != want {
			t.Errorf("promised(%q) = %t, want %t", what, got, want)
		}
	}
}

func claimsOf(cs ...*resourceapi.ResourceClaim) map[types.NamespacedName]*resourceapi.ResourceClaim {
	out := map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, c := range cs {
		out[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	return out
}

func allocationOn(node, device string) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "mig", Driver: migClassName, Pool: node, Device: device}}}}
}
