package controller

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSchedulerErrorNotToldNoLongerPlanned: a pod whose change is in flight
// and whose last scheduling try failed on an error of kube-scheduler's own
// (SchedulerError) is still the planner's: its change is kept, and it hears
// neither NoLongerPlanned nor, once unschedulable again, the same
// WaitingForRepartition a second time.
func TestSchedulerErrorNotToldNoLongerPlanned(t *testing.T) {
	h, _ := planThreeGForP1(t)
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], EventWaitingForRepartition) {
		t.Fatalf("p1 told %v, want %s", ev, EventWaitingForRepartition)
	}
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason = v1alpha1.PhaseDraining, v1alpha1.ReasonDraining
		return st
	})
	setScheduled := func(reason string) {
		t.Helper()
		var p1 corev1.Pod
		if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "p1"}, &p1); err != nil {
			t.Fatal(err)
		}
		p1.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason}}
		if err := h.c.Status().Update(context.Background(), &p1); err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(h.a.max())
		h.settle()
	}
	spec := h.specOf("n1")
	setScheduled(corev1.PodReasonSchedulerError)
	if ev := h.events(); len(ev) > 0 {
		t.Errorf("after a SchedulerError, with its change kept (spec %v), p1 was told %v", h.specOf("n1"), ev)
	}
	setScheduled(corev1.PodReasonUnschedulable)
	if ev := h.events(); len(ev) > 0 {
		t.Errorf("unschedulable again, p1 was told %v, which it heard already", ev)
	}
	if got := h.specOf("n1"); !maps.Equal(got, spec) {
		t.Errorf("n1's spec %v, want %v kept", got, spec)
	}
}

// TestLeftDemandToldWhenNothingElsePending: a pod told a placement is kept
// for it, whose claim is then deleted, hears NoLongerPlanned though no other
// pod is pending (a pass that plans nothing).
func TestLeftDemandToldWhenNothingElsePending(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("4g.40gb@0,3g.40gb@4").inUse("3g.40gb@4")),
		autoClaim("c1", profileSelector("7g.80gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if ev := h.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, EventWaitingForCapacity) }) {
		t.Fatalf("p1 told %v, want %s", ev, EventWaitingForCapacity)
	}
	if err := h.c.Delete(context.Background(), autoClaim("c1", "")); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	if ev := h.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, EventNoLongerPlanned) }) {
		t.Errorf("p1 left the demand, its claim gone, and was told %v, want %s", ev, EventNoLongerPlanned)
	}
	if len(h.a.events) != 0 {
		t.Errorf("%d pods still remembered as told", len(h.a.events))
	}
}
