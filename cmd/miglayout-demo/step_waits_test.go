package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// notReadyWithin is how long a test lets a wait run that must not succeed:
// the waits poll every 200 ms, so it sees a few polls.
const notReadyWithin = 700 * time.Millisecond

// demoWith is a demo whose API client holds objs.
func demoWith(t *testing.T, objs ...crclient.Object) *demo {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return &demo{out: io.Discard, crc: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
}

// layoutWithStatus is the demo's MigLayout at generation 2 with the given
// observed generation and Ready status.
func layoutWithStatus(observed int64, ready metav1.ConditionStatus) *v1alpha1.MigLayout {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: layoutName, Generation: 2}}
	ml.Status.ObservedGeneration = observed
	ml.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready, Reason: "Test", LastTransitionTime: metav1.Now()}}
	return ml
}

// TestWaitReadyNeedsTheGenerationReady: a step waiting for the layout it
// just changed passes only once the controller reports Ready for that
// generation: a Ready status of the generation before, or a status not
// Ready, keeps it waiting (and fails it once its time is up).
func TestWaitReadyNeedsTheGenerationReady(t *testing.T) {
	tests := map[string]struct {
		ml      *v1alpha1.MigLayout
		wantErr bool
	}{
		"ready at the generation":        {layoutWithStatus(2, metav1.ConditionTrue), false},
		"ready at a later generation":    {layoutWithStatus(3, metav1.ConditionTrue), false},
		"ready at the generation before": {layoutWithStatus(1, metav1.ConditionTrue), true},
		"not ready at the generation":    {layoutWithStatus(2, metav1.ConditionFalse), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), notReadyWithin)
			defer cancel()
			err := demoWith(t, tc.ml).waitLayoutReady(ctx)
			if (err != nil) != tc.wantErr {
				t.Errorf("waitLayoutReady: %v, want an error: %t", err, tc.wantErr)
			}
		})
	}
}

// TestWaitInUseNeedsTheDeviceOnItsGPU: the layout-change step goes on only
// once the agent reports trainer's device in use on trainer's GPU: the same
// device in use on another GPU, or another device in use on that GPU, does
// not count.
func TestWaitInUseNeedsTheDeviceOnItsGPU(t *testing.T) {
	dev := mig.Device{Profile: "3g.40gb", Start: 4}
	tests := map[string]struct {
		gpus    []v1alpha1.GPUStatus
		wantErr bool
	}{
		"in use on its GPU":            {[]v1alpha1.GPUStatus{{Index: 0}, {Index: 1, InUse: "3g.40gb@4"}}, false},
		"in use beside another":        {[]v1alpha1.GPUStatus{{Index: 1, InUse: "1g.10gb@0,3g.40gb@4"}}, false},
		"in use on another GPU":        {[]v1alpha1.GPUStatus{{Index: 0, InUse: "3g.40gb@4"}, {Index: 1}}, true},
		"another device on its GPU":    {[]v1alpha1.GPUStatus{{Index: 1, InUse: "3g.40gb@0"}}, true},
		"GPU not reported":             {[]v1alpha1.GPUStatus{{Index: 0, InUse: "3g.40gb@4"}}, true},
		"nothing in use on its GPU":    {[]v1alpha1.GPUStatus{{Index: 1}}, true},
		"in-use list not a layout":     {[]v1alpha1.GPUStatus{{Index: 1, InUse: "3g.40gb@4,bogus"}}, true},
		"its GPU listed after another": {[]v1alpha1.GPUStatus{{Index: 2}, {Index: 1, InUse: "3g.40gb@4"}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: nodeA100}}
			nml.Status.GPUs = tc.gpus
			ctx, cancel := context.WithTimeout(t.Context(), notReadyWithin)
			defer cancel()
			err := demoWith(t, nml).waitInUse(ctx, 1, dev)
			if (err != nil) != tc.wantErr {
				t.Errorf("waitInUse: %v, want an error: %t", err, tc.wantErr)
			}
		})
	}
}

// TestWaitAutoStatusNeedsAnAutoStatus: a MigLayout without status.auto
// (the controller has not planned yet) keeps the Auto step waiting, whatever
// the step asks of it.
func TestWaitAutoStatusNeedsAnAutoStatus(t *testing.T) {
	ml := layoutWithStatus(2, metav1.ConditionTrue)
	ctx, cancel := context.WithTimeout(t.Context(), notReadyWithin)
	defer cancel()
	if _, err := demoWith(t, ml).waitAutoStatus(ctx, func(*v1alpha1.AutoStatus) bool { return true }); err == nil {
		t.Error("waitAutoStatus: no error for a MigLayout without status.auto")
	}
	ml.Status.Auto = &v1alpha1.AutoStatus{PendingPods: 1, NotServablePods: 1}
	got, err := demoWith(t, ml).waitAutoStatus(t.Context(), func(a *v1alpha1.AutoStatus) bool { return a.PendingPods == 1 && a.NotServablePods == 1 })
	if err != nil || got.Status.Auto.PendingPods != 1 {
		t.Errorf("waitAutoStatus: %v, %v; want the MigLayout", got, err)
	}
}

// TestPrintAllocationOfAClaimNotAllocated: a claim without an allocation,
// or with one of no device, fails the step that shows it.
func TestPrintAllocationOfAClaimNotAllocated(t *testing.T) {
	tests := map[string]*resourceapi.AllocationResult{
		"no allocation":         nil,
		"allocation of nothing": {},
	}
	for name, alloc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "gpu-16g"}}
			claim.Status.Allocation = alloc
			_, _, err := (&demo{out: io.Discard}).printAllocation(t.Context(), claim)
			if err == nil || !strings.Contains(err.Error(), "not allocated") {
				t.Errorf("printAllocation: %v, want the claim not allocated", err)
			}
		})
	}
}
