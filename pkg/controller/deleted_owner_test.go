package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeletedMigLayoutReleasesItsNodes: a MigLayout deleted in the
// background (the garbage collector not yet at its NodeMigLayouts) has its
// NodeMigLayouts deleted by the controller, so that their agents do not go
// on with changes no MigLayout asks for; those of another MigLayout, and
// those orphaned (no owner), stay.
func TestDeletedMigLayoutReleasesItsNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	gone := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "b")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(b,
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).build(), gone),
		ownedBy(nodeMigLayout("n2").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).build(), b),
		nodeMigLayout("n3").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).build(),
	).WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]bool{"n1": false, "n2": true, "n3": true} {
		var nml v1alpha1.NodeMigLayout
		err := c.Get(ctx, types.NamespacedName{Name: node}, &nml)
		if exists := err == nil; exists != want || (err != nil && !apierrors.IsNotFound(err)) {
			t.Errorf("NodeMigLayout %s: %v, want it kept %t", node, err, want)
		}
	}
}

// TestDeletedInTheCacheOnlyReleasesNothing: a MigLayout the cache shows
// gone, though the API server has it (made again under the name, its
// NodeMigLayouts already in the cache, its own watch behind), keeps them;
// without a live reader nothing is deleted either.
func TestDeletedInTheCacheOnlyReleasesNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	again := staticMigLayout("a", "uid-a2", "a")
	for name, live := range map[string]bool{"the API server has it": true, "no live reader": false} {
		t.Run(name, func(t *testing.T) {
			api := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(again.DeepCopy(),
				ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).build(), again)).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			cache := interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*v1alpha1.MigLayout); ok {
					return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("miglayouts").GroupResource(), key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			}})
			r := &Reconciler{Client: cache, Scheme: api.Scheme(), Recorder: events.NewFakeRecorder(100)}
			if live {
				r.APIReader = api
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatal(err)
			}
			var nml v1alpha1.NodeMigLayout
			if err := api.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
				t.Errorf("NodeMigLayout n1 of the MigLayout the API server has: %v, want it kept", err)
			}
		})
	}
}
