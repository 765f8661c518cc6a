package controller

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSpecWrittenOnceWhereTheCRDDropsUUIDs: where the NodeMigLayout CRD is
// of an earlier release (the API server drops the entries' GPU UUIDs), a
// Static MigLayout's node is written once, not again on every reconcile
// for UUIDs the API server keeps dropping.
func TestSpecWrittenOnceWhereTheCRDDropsUUIDs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	nml := ownedBy(nodeMigLayout("n1").status(a100(0).uuid("GPU-0").layout(wholeLayout)).build(), ml)
	patches := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if n, ok := obj.(*v1alpha1.NodeMigLayout); ok {
				patches++
				for i := range n.Spec.GPUs {
					n.Spec.GPUs[i].UUID = "" // pruned: not in the CRD's schema
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	for range 3 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if patches != 1 {
		t.Errorf("%d spec writes in 3 reconciles, want 1", patches)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.GPUs) != 1 || got.Spec.GPUs[0].Layout == "" {
		t.Errorf("n1's spec %+v, want GPU 0's entry", got.Spec.GPUs)
	}
}
