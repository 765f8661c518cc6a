package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestLeavingAutoModeTellsWaitingPods: pods the planner told why they wait
// hear, once the last Auto MigLayout turns Static, that Auto mode no longer
// plans for them (the planner then reads no pod, so what it told them would
// stand); a pod bound meanwhile hears nothing, and nobody hears twice.
func TestLeavingAutoModeTellsWaitingPods(t *testing.T) {
	ctx := context.Background()
	ml := migLayout("auto").selects("pool", "gpu").build()
	ml.Spec.Mode = v1alpha1.ModeAuto
	class := migDeviceClass()
	claimFor := func(name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	}
	podFor := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "mig", ResourceClaimName: ptr.To(name)}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	}
	waiting, bound := podFor("waiting"), podFor("bound")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(&ml, class, claimFor("waiting"), claimFor("bound"), waiting, bound, node("cpu-1", map[string]string{"pool": "cpu"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := events.NewFakeRecorder(10)
	a := &AutoPlanner{Client: c, Recorder: rec, Idle: time.Second, Max: 5 * time.Second, Now: func() time.Time { return now }}
	heard := func() []string {
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		return got
	}
	pass := func() {
		t.Helper()
		if _, err := a.Reconcile(ctx, autoKey); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	now = now.Add(2 * time.Second)
	pass()
	if got := heard(); len(got) != 2 {
		t.Fatalf("events while in Auto mode: %q, want one per pod: the test shows nothing", got)
	}
	bound.Spec.NodeName = "cpu-1"
	if err := c.Update(ctx, bound); err != nil {
		t.Fatal(err)
	}
	var live v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "auto"}, &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Mode, live.Spec.Policy = v1alpha1.ModeStatic, nil
	live.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2))
	if err := c.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	pass()
	got := heard()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+EventNoLongerPlanned+" ") || !strings.Contains(got[0], "no MigLayout is in Auto mode") {
		t.Errorf("events once Static: %q, want one %s for the waiting pod", got, EventNoLongerPlanned)
	}
	now = now.Add(time.Minute)
	pass()
	if got := heard(); len(got) != 0 {
		t.Errorf("events on the next pass: %q, want none", got)
	}
}
