package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestBinderLeavesOtherPoolsAlone: a device of another node's pool, of the
// same driver, is not this Binder's to answer: the claim has nothing
// unanswered here and is not asked about again, even before the agent's
// first publication.
func TestBinderLeavesOtherPoolsAlone(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	claim.Status.Allocation.Devices.Results[0].Pool = "n2"
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).
		WithStatusSubresource(&resourceapi.ResourceClaim{}).Build()
	b := &Binder{Client: c, Gate: &BindingGate{}, Driver: testDriver, NodeName: "n1"}
	if got := b.unanswered(claim); len(got) != 0 {
		t.Errorf("unanswered %v, want none of pool n2", got)
	}
	res, err := b.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter > 0 {
		t.Errorf("requeued after %v for another node's device", res.RequeueAfter)
	}
}

// TestBinderEndsAPromiseAnsweredMeanwhile: a confirmation whose write
// failed was applied after all (the claim shows it): the next Reconcile
// finds nothing to answer and ends the promise, so the device is no longer
// held as being confirmed (a drain may go on).
func TestBinderEndsAPromiseAnsweredMeanwhile(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	c, gate, b := failFirstWrite(t, claim)
	ctx, key := t.Context(), client.ObjectKeyFromObject(claim)
	var cur resourceapi.ResourceClaim
	if err := c.Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Devices = allocatedClaim("c").condition(devA, slices.BindingConditionReady).obj().Status.Devices
	if err := c.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	if !gate.Refusable().Has(devA) {
		t.Errorf("%s still held by a promise its claim shows answered", devA)
	}
	if b.hasPromise(key) {
		t.Error("the claim still has a promise")
	}
}

// TestBinderEndsAPromiseOfADeletedClaim: the claim is deleted between the
// read and the retried write of a confirmation (the write answers NotFound):
// the promise ends, and the device is no longer held as being confirmed.
func TestBinderEndsAPromiseOfADeletedClaim(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).obj()
	writes := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(claim).
		WithStatusSubresource(&resourceapi.ResourceClaim{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			writes++
			if writes == 1 {
				return errors.New("connection reset")
			}
			return apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), claim.Name)
		}}).Build()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	b := &Binder{Client: c, Gate: gate, Driver: testDriver, NodeName: "n1"}
	ctx, key := t.Context(), client.ObjectKeyFromObject(claim)
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err == nil {
		t.Fatal("Reconcile succeeded through a failing write")
	}
	if _, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	if !gate.Refusable().Has(devA) {
		t.Errorf("%s still held by the promise of a deleted claim", devA)
	}
}

// TestBinderAnswersAreItsOwnEntries: a status entry of the device for an
// allocation share (ShareID set) is not the Binder's answer for the device.
func TestBinderAnswersAreItsOwnEntries(t *testing.T) {
	claim := allocatedClaim("c").device(devA, true).condition(devA, slices.BindingConditionReady).obj()
	share := "share-1"
	claim.Status.Devices[0].ShareID = &share
	if answered(claim, testDriver, "n1", devA) || confirmed(claim, testDriver, "n1", devA) {
		t.Errorf("a share's entry taken as the device's answer: %+v", claim.Status.Devices)
	}
	b := &Binder{Driver: testDriver, NodeName: "n1"}
	if diff := cmp.Diff([]string{devA}, b.unanswered(claim)); diff != "" {
		t.Errorf("unanswered (-want +got):\n%s", diff)
	}
}
