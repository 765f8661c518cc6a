package agent

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPendingGPUIsNoFailedPass: a GPU left Pending for its turn (its
// Repartitioning report failed, so no NVML work was done) records no
// PassFailed warning: the pass did not fail.
func TestPendingGPUIsNoFailedPass(t *testing.T) {
	g, c := rigWithAutoChange(t, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		for _, st := range obj.(*v1alpha1.NodeMigLayout).Status.GPUs {
			if st.Phase == v1alpha1.PhaseRepartitioning {
				return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
			}
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	g.r.Reread = LiveSpecs(c, "n1")
	rec := events.NewFakeRecorder(20)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var after v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &after); err != nil {
		t.Fatal(err)
	}
	if st := after.Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != v1alpha1.ReasonPending {
		t.Fatalf("premise: GPU 0 %s/%s, want Pending/Pending", st.Phase, st.Reason)
	}
	if told := eventReasons(rec); slices.Contains(told, EventPassFailed) {
		t.Errorf("events %q, want no %s", told, EventPassFailed)
	}
}
