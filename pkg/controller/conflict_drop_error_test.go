package controller

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A failed drop of the changes not started on a node another MigLayout
// selects too fails the pass: it is tried again, not taken as done.
func TestReconcileReturnsAFailedConflictDrop(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	writeFailed := errors.New("API server unavailable")
	a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "a")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(a100(0).layout(wholeLayout)).build(), a)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(failNodeMigLayoutPatches(writeFailed)).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); !errors.Is(err, writeFailed) {
		t.Errorf("Reconcile: %v, want the failed drop returned", err)
	}
}

// failNodeMigLayoutPatches answers every patch of a NodeMigLayout with err;
// other patches go through.
func failNodeMigLayoutPatches(err error) interceptor.Funcs {
	return interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*v1alpha1.NodeMigLayout); ok {
			return err
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
}
