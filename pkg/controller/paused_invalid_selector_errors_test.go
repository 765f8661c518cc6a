package controller

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// pausedInvalidSelector is a paused MigLayout "a" whose selector does not
// parse, and n1's NodeMigLayout, which it controls, holding a change its
// agent has not started (whole GPU over halves).
func pausedInvalidSelector() (*v1alpha1.MigLayout, *v1alpha1.NodeMigLayout) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	a.Spec.Paused = true
	a.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}
	return a, ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(halvesLayout)).build(), a)
}

// TestPausedWithAnInvalidSelectorReadFailsDropsNothing: a paused MigLayout
// whose selector does not parse, that cannot be read live before a change
// is dropped (the API server fails the GET), drops nothing: the change
// stands, and the error is returned so the reconcile is retried.
func TestPausedWithAnInvalidSelectorReadFailsDropsNothing(t *testing.T) {
	a, nml := pausedInvalidSelector()
	c, r := onePausedNode(t, a, nml)
	r.APIReader = &countingFailingReader{err: errors.New("API server unavailable")}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err == nil {
		t.Error("reconcile whose live read failed: no error, want it returned")
	}
	if got := specLayouts(t, c)["n1"]; got != wholeLayout {
		t.Errorf("n1's spec %q, want %s kept (the pause could not be confirmed live)", got, wholeLayout)
	}
}

// TestPausedWithAnInvalidSelectorReturnsAFailedDrop: a failed drop of the
// change not started on a node of a paused MigLayout whose selector does
// not parse fails the pass: it is tried again, not taken as done.
func TestPausedWithAnInvalidSelectorReturnsAFailedDrop(t *testing.T) {
	writeFailed := errors.New("API server unavailable")
	a, nml := pausedInvalidSelector()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(failNodeMigLayoutPatches(writeFailed)).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); !errors.Is(err, writeFailed) {
		t.Errorf("Reconcile: %v, want the failed drop returned", err)
	}
}
