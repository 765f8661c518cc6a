package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestInvalidSelectorConflictDropSaysWhy: b, whose selector stopped
// parsing, holds n1, which a selects too; the change b drops there says
// it was dropped for the conflict (not for a pause: b is not paused).
func TestInvalidSelectorConflictDropSaysWhy(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(a100(0).layout(wholeLayout)).build(), b)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	if got := nml.Spec.GPUs[0].Reason; !strings.HasPrefix(got, dropForConflict+": ") {
		t.Errorf("n1's reason %q, want it to start %q", got, dropForConflict)
	}
}

// TestReconcileReturnsARefusedStatusWrite: a MigLayout whose status write
// is refused fails the reconcile (it is tried again), though its nodes'
// specs were written.
func TestReconcileReturnsARefusedStatusWrite(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "miglayouts"}, "a", nil)
	a := staticMigLayout("a", "uid-a", "a")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, node("n1", map[string]string{"pool": "a"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*v1alpha1.MigLayout); ok {
				return forbidden
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	_, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if !errors.Is(err, forbidden) {
		t.Errorf("Reconcile: %v, want the refused status write returned", err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &v1alpha1.NodeMigLayout{}); err != nil {
		t.Errorf("n1's NodeMigLayout: %v, want it written before the status", err)
	}
}
