package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// rigWithAutoChange is a rig whose GPU 0 holds 7g.80gb@0 and a client, built
// with funcs, holding NodeMigLayout n1 that asks GPU 0 for 3g.40gb@4 for pod
// ns/p1 (an Auto plan the agent has not picked up: status Ready on the
// layout before).
func rigWithAutoChange(t *testing.T, funcs interceptor.Funcs) (*rig, client.WithWatch) {
	t.Helper()
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", ServedPods: []string{"ns/p1"}}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, MIGPending: true,
			Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}}
	return g, nmlClient(t, nml, funcs)
}

// TestNoNVMLWorkWhenRepartitioningIsNotShown: the cancel protocol between
// the Auto planner and the agent rests on the GPU being shown
// Repartitioning before the agent reads the spec a last time: the planner
// cancels an unneeded change only while the GPU shows Draining (or Ready on
// the layout before), and only on the NodeMigLayout as read. Where the
// agent's report of Repartitioning fails (the API server answers 503), a
// cancel may be written meanwhile, unseen by its last read: the agent does
// no NVML work on the GPU (it stays 7g.80gb@0, Pending, retried) instead of
// destroying the 7g.80gb for a layout nobody may ask for.
func TestNoNVMLWorkWhenRepartitioningIsNotShown(t *testing.T) {
	g, c := rigWithAutoChange(t, repartitioningReportFails())
	g.r.Reread = LiveSpecs(c, "n1")
	cancelled := false
	// The Auto planner's pass once the agent has read the spec a last
	// time: undestroyed (Draining or Ready) cancels the change, written
	// with the optimistic lock on the object read.
	g.locks.onBegin = func() {
		ctx := context.Background()
		var now v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &now); err != nil {
			t.Fatal(err)
		}
		if p := now.Status.GPUs[0].Phase; p != v1alpha1.PhaseDraining && p != v1alpha1.PhaseReady {
			return
		}
		next := now.DeepCopy()
		next.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "cancels the change to 3g.40gb@4 before anything is destroyed"}}
		if err := c.Patch(ctx, next, client.MergeFromWithOptions(&now, client.MergeFromWithOptimisticLock{})); err != nil {
			return // the cancel is not written: fine
		}
		cancelled = true
	}
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(20)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := g.layouts(t)[0]; got != "7g.80gb@0" {
		t.Errorf("the agent's Repartitioning report failed, so the status still showed the GPU %s (cancel written: %v), yet the agent repartitioned it to %q: a cancel written meanwhile would be lost",
			v1alpha1.PhaseDraining, cancelled, got)
	}
	var after v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &after); err != nil {
		t.Fatal(err)
	}
	if st := after.Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != v1alpha1.ReasonPending || !strings.Contains(st.Message, "could not be shown Repartitioning") {
		t.Errorf("GPU 0 status %s/%s (%s), want Pending/Pending: the GPU could not be shown Repartitioning", st.Phase, st.Reason, st.Message)
	}
}

// TestRetryAfterAFailedRepartitioningReportShowsDraining: after a pass
// whose Repartitioning report failed (the API server answered 503 once),
// the retry shows the GPU Draining again during its settle period, where
// the Auto planner may still cancel the change (it cancels only changes it
// sees draining), and then applies it.
func TestRetryAfterAFailedRepartitioningReportShowsDraining(t *testing.T) {
	failed := false
	var shown []v1alpha1.GPUPhase // GPU 0's phases as written, pass after pass
	g, c := rigWithAutoChange(t, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		st := obj.(*v1alpha1.NodeMigLayout).Status.GPUs
		if len(st) > 0 && st[0].Phase == v1alpha1.PhaseRepartitioning && !failed {
			failed = true
			return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
		}
		if len(st) > 0 {
			shown = append(shown, st[0].Phase)
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	g.r.Reread = LiveSpecs(c, "n1")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(20), Now: func() time.Time { return clock }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	res, _ := r.Reconcile(t.Context(), req)
	if !failed || g.layouts(t)[0] != "7g.80gb@0" {
		t.Fatalf("first pass: report failed %v, GPU 0 %q; want the failed report to leave 7g.80gb@0", failed, g.layouts(t)[0])
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 2*time.Second {
		t.Errorf("first pass: retry after %v, want about a second", res.RequeueAfter)
	}
	first := len(shown)
	clock = clock.Add(res.RequeueAfter) // the retry
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := g.layouts(t)[0]; got != "3g.40gb@4" {
		t.Errorf("after the retry GPU 0 holds %q, want 3g.40gb@4", got)
	}
	want := []v1alpha1.GPUPhase{v1alpha1.PhaseDraining, v1alpha1.PhaseRepartitioning, v1alpha1.PhaseReady}
	if diff := cmp.Diff(want, shown[first:]); diff != "" {
		t.Errorf("GPU 0's phases written by the retry (-want +got):\n%s", diff)
	}
}

// TestCancelWrittenWhileDrainingHoldsWhenRereadFails: the Auto planner
// cancels a change while the GPU shows Draining (the settle period), as
// the protocol allows. The agent then shows Repartitioning and reads the
// spec a last time, but that read fails (the API server answers 503): it
// must not go on with the spec it read at the start of the pass, which
// would destroy the 7g.80gb for the cancelled 3g.40gb@4 (and its next pass
// make it again).
func TestCancelWrittenWhileDrainingHoldsWhenRereadFails(t *testing.T) {
	g, c := rigWithAutoChange(t, interceptor.Funcs{})
	g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) {
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	cancelled := false
	// The Auto planner's pass during the settle period: the GPU shows
	// Draining, so its unneeded change is cancelled.
	g.r.Sleep = func(ctx context.Context, _ time.Duration) error {
		var now v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &now); err != nil {
			return err
		}
		if now.Status.GPUs[0].Phase != v1alpha1.PhaseDraining {
			return nil
		}
		next := now.DeepCopy()
		next.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "cancels the change to 3g.40gb@4 before anything is destroyed"}}
		if err := c.Patch(ctx, next, client.MergeFromWithOptions(&now, client.MergeFromWithOptimisticLock{})); err == nil {
			cancelled = true
		}
		return nil
	}
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(20)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if !cancelled {
		t.Fatal("the planner's cancel was not written during the settle period")
	}
	if got := g.layouts(t)[0]; got != "7g.80gb@0" {
		t.Errorf("the change was cancelled while the GPU showed Draining, but the agent's last read of the spec failed and it repartitioned the GPU to %q anyway: the cancelled change destroyed the 7g.80gb@0", got)
	}
}

// repartitioningReportFails has the API server answer 503 to a status
// write that shows a GPU Repartitioning.
func repartitioningReportFails() interceptor.Funcs {
	return interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		for _, st := range obj.(*v1alpha1.NodeMigLayout).Status.GPUs {
			if st.Phase == v1alpha1.PhaseRepartitioning {
				return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
			}
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}
}
