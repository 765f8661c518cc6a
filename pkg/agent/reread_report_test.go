package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNoNVMLWorkWhenRepartitioningIsNotShown: the cancel protocol between
// the Auto planner and the agent rests on the GPU being shown
// Repartitioning before the agent reads the spec a last time: the planner
// cancels an unneeded change only while the GPU shows Draining (or Ready on
// the layout before), and only on the NodeMigLayout as read. The agent's
// report of Repartitioning may fail (the API server answers 503); its error
// is only logged at V(2) and the agent goes on: it reads the spec (not
// cancelled yet), then calls NVML while the status still says Draining. The
// planner, planning meanwhile, sees Draining and writes its cancel (the
// object is unchanged, so its optimistic lock passes). The agent destroys
// the 7g.80gb for a layout nobody asks for, and its next pass destroys the
// new 3g.40gb to make the 7g.80gb again.
func TestNoNVMLWorkWhenRepartitioningIsNotShown(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", ServedPods: []string{"ns/p1"}}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, MIGPending: true,
			Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nml).WithStatusSubresource(nml).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			for _, st := range obj.(*v1alpha1.NodeMigLayout).Status.GPUs {
				if st.Phase == v1alpha1.PhaseRepartitioning {
					return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
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
	_, _ = r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}})
	if got := g.layouts(t)[0]; got != "7g.80gb@0" {
		t.Errorf("the agent's Repartitioning report failed, so the status still showed the GPU %s (cancel written: %v), yet the agent repartitioned it to %q: a cancel written meanwhile would be lost",
			v1alpha1.PhaseDraining, cancelled, got)
	}
	var after v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &after); err != nil {
		t.Fatal(err)
	}
	if st := after.Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || !strings.Contains(st.Message, "could not be shown Repartitioning") {
		t.Errorf("GPU 0 status %s (%s), want Pending: the GPU could not be shown Repartitioning", st.Phase, st.Message)
	}
}

// TestCancelWrittenWhileDrainingHoldsWhenRereadFails: the Auto planner
// cancels a change while the GPU shows Draining (the settle period), as
// the protocol allows. The agent then shows Repartitioning and reads the
// spec a last time, but that read fails (the API server answers 503): the
// agent goes on with the spec it read at the start of the pass and
// destroys the 7g.80gb for the cancelled 3g.40gb@4, although the cancel was
// written before the GPU ever showed Repartitioning. Its next pass reads
// the cancel and repartitions the GPU back: two repartitions for nobody.
func TestCancelWrittenWhileDrainingHoldsWhenRereadFails(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", ServedPods: []string{"ns/p1"}}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, MIGPending: true,
			Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nml).WithStatusSubresource(nml).Build()
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
	_, _ = r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}})
	if !cancelled {
		t.Fatal("the planner's cancel was not written during the settle period")
	}
	if got := g.layouts(t)[0]; got != "7g.80gb@0" {
		t.Errorf("the change was cancelled while the GPU showed Draining, but the agent's last read of the spec failed and it repartitioned the GPU to %q anyway: the cancelled change destroyed the 7g.80gb@0", got)
	}
}
