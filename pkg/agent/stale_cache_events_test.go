package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEventsToldOnceBehindAStaleCache: a pass that follows a pass's status
// write before the cache shows it (a claim prepared meanwhile triggers it,
// tens of milliseconds later) reads the status the last pass wrote, not the
// cache's older one: a GPU repartitioned, or blocked, is told once.
func TestEventsToldOnceBehindAStaleCache(t *testing.T) {
	for name, tc := range map[string]struct {
		inUse bool
		want  []string
	}{
		"repartitioned": {want: []string{EventDraining, EventRepartitioned}},
		"blocked":       {inUse: true, want: []string{EventBlocked}},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			if tc.inUse {
				g.alloc.cached = sets.New("gpu-0-mig-7g80gb-0-0")
				g.alloc.live = g.alloc.cached
			}
			nml := wholeAskedHalves()
			base := nmlClient(t, nml, interceptor.Funcs{})
			var stale *v1alpha1.NodeMigLayout // what the cache shows: the object before the first pass
			if err := base.Get(t.Context(), types.NamespacedName{Name: "n1"}, nml); err != nil {
				t.Fatal(err)
			}
			stale = nml.DeepCopy()
			cached := interceptor.NewClient(base, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && stale != nil {
						stale.DeepCopyInto(n)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			rec := events.NewFakeRecorder(20)
			r := &NodeReconciler{Client: cached, APIReader: base, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
			for range 2 {
				if _, err := r.Reconcile(t.Context(), req); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if diff := cmp.Diff(tc.want, eventReasons(rec)); diff != "" {
				t.Errorf("events of two passes, the second behind a stale cache (-want +got):\n%s", diff)
			}
		})
	}
}

// wholeAskedHalves is NodeMigLayout n1 whose spec (generation 2) asks GPU 0
// for two 3g.40gb, and whose status (of generation 1) reports it Ready on
// a whole 7g.80gb.
func wholeAskedHalves() *v1alpha1.NodeMigLayout {
	return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}},
		Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1, GPUs: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, MIGPending: true,
			Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}}
}
