package controller

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeletingMigLayoutReleasesItsNodes: a MigLayout deleted while a
// finalizer holds it (a GitOps tool's, or a foreground deletion) releases
// its nodes at once: the NodeMigLayout whose change the agent has not
// started goes, where garbage collection would delete it only once the
// MigLayout is gone and the agent would carry the change out meanwhile.
// Another MigLayout's node is left alone. Deleted with --cascade=orphan,
// its NodeMigLayouts stay, as asked.
func TestDeletingMigLayoutReleasesItsNodes(t *testing.T) {
	tests := map[string]struct {
		finalizer string
		wantGone  bool
	}{
		"held by another finalizer": {finalizer: "example.com/hold", wantGone: true},
		"foreground deletion":       {finalizer: metav1.FinalizerDeleteDependents, wantGone: true},
		"orphaning its dependents":  {finalizer: metav1.FinalizerOrphanDependents},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "b")
			a.Finalizers = []string{tc.finalizer}
			pending := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "b"}),
					ownedBy(nodeMigLayout("n1").spec(pending).status(a100(0).layout("7g.80gb@0")).build(), a),
					ownedBy(nodeMigLayout("n2").spec(pending).status(a100(0).layout("7g.80gb@0")).build(), b)).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10)}
			if err := c.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, types.NamespacedName{Name: "a"}, a); err != nil || a.DeletionTimestamp == nil {
				t.Fatalf("MigLayout a after its deletion: %v, deletionTimestamp %v; want it held by its finalizer", err, a.DeletionTimestamp)
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatal(err)
			}
			err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &v1alpha1.NodeMigLayout{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("n1's NodeMigLayout gone: %t (%v), want %t", gone, err, tc.wantGone)
			}
			if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &v1alpha1.NodeMigLayout{}); err != nil {
				t.Errorf("another MigLayout's NodeMigLayout: %v, want it kept", err)
			}
		})
	}
}
