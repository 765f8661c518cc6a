package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestWipedPoolWakesTheNode: the deletion of a ResourceSlice of the node's
// pool starts a pass where it leaves the pool without a slice (the kubelet
// wiped it), so that the pool is published again at once; not where a slice
// of the pool is left, nor for another pool's or driver's slice.
func TestWipedPoolWakesTheNode(t *testing.T) {
	slice := func(name, driver, pool string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1}}}
	}
	deleted := slice("n1-a", testDriver, "n1")
	pass := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "n1"}}}
	tests := map[string]struct {
		deleted client.Object
		left    []client.Object
		listErr error
		want    []reconcile.Request
	}{
		"the pool's last slice":          {deleted: deleted, want: pass},
		"another driver's slice is left": {deleted: deleted, left: []client.Object{slice("x", "gpu.example.com", "n1")}, want: pass},
		"another pool's slice is left":   {deleted: deleted, left: []client.Object{slice("x", testDriver, "n2")}, want: pass},
		"a slice of the pool is left":    {deleted: deleted, left: []client.Object{slice("n1-b", testDriver, "n1")}},
		"the slices cannot be listed":    {deleted: deleted, left: []client.Object{slice("n1-b", testDriver, "n1")}, listErr: errors.New("boom"), want: pass},
		"another pool's slice":           {deleted: slice("n2-a", testDriver, "n2")},
		"another driver's slice":         {deleted: slice("n1-x", "gpu.example.com", "n1")},
		"an object that is not a slice":  {deleted: &corev1.Pod{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.left...).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.listErr != nil {
						return tc.listErr
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			m := NewMetrics(prometheus.NewRegistry())
			r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: &Repartitioner{Driver: testDriver, Metrics: m}}
			if diff := cmp.Diff(tc.want, r.wipedToNode(t.Context(), tc.deleted)); diff != "" {
				t.Errorf("passes asked (-want +got):\n%s", diff)
			}
			// A pool found deleted is counted; a pass asked for on a failed read is not.
			want := 0.0
			if tc.want != nil && tc.listErr == nil {
				want = 1
			}
			if got := testutil.ToFloat64(m.poolDeleted); got != want {
				t.Errorf("miglayout_agent_pool_deletions_total = %v, want %v", got, want)
			}
		})
	}
}

// TestSliceEventsPassedAreDeletions: of the ResourceSlice events, only
// deletions reach wipedToNode; the agent's own writes of the pool cause no
// pass.
func TestSliceEventsPassedAreDeletions(t *testing.T) {
	s := &resourceapi.ResourceSlice{}
	got := map[string]bool{
		"create":  sliceDeleted.Create(event.CreateEvent{Object: s}),
		"update":  sliceDeleted.Update(event.UpdateEvent{ObjectOld: s, ObjectNew: s}),
		"delete":  sliceDeleted.Delete(event.DeleteEvent{Object: s}),
		"generic": sliceDeleted.Generic(event.GenericEvent{Object: s}),
	}
	if diff := cmp.Diff(map[string]bool{"create": false, "update": false, "delete": true, "generic": false}, got); diff != "" {
		t.Errorf("events passed (-want +got):\n%s", diff)
	}
}
