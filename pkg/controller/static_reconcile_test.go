package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// reconcileLayoutA reconciles MigLayout a and fails the test on an error.
func reconcileLayoutA(t *testing.T, r *Reconciler) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
}

// TestStaticEdgesInvalidOwnSelectorKeepsItsNodes: a MigLayout whose own
// node selector stops parsing cannot say which nodes it selects: it
// releases none, and their NodeMigLayouts keep their spec.
func TestStaticEdgesInvalidOwnSelectorKeepsItsNodes(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), a)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	reconcileLayoutA(t, r)
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &nml); err != nil {
		t.Fatalf("n1's NodeMigLayout: %v, want it kept", err)
	}
	if len(nml.Spec.GPUs) != 1 || nml.Spec.GPUs[0].Layout != wholeLayout {
		t.Errorf("n1's spec %+v, want it left at %q", nml.Spec.GPUs, wholeLayout)
	}
}

// TestStaticEdgesDeletingNodeReleased: a node being deleted (held by a
// finalizer) is selected no more: its NodeMigLayout goes, as for a node
// gone.
func TestStaticEdgesDeletingNodeReleased(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	n1 := node("n1", map[string]string{"pool": "a"})
	n1.Finalizers = []string{"example.com/drain"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, n1,
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), a)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	if err := c.Delete(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	reconcileLayoutA(t, r)
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &v1alpha1.NodeMigLayout{}); !apierrors.IsNotFound(err) {
		t.Errorf("n1's NodeMigLayout: %v, want it deleted with its node being deleted", err)
	}
}

// TestStaticEdgesRecreatedMigLayoutWarnsAgain: a MigLayout deleted and
// made again under the same name between two reconciles is a new object:
// a spec problem the old one was warned about is warned about again.
func TestStaticEdgesRecreatedMigLayoutWarnsAgain(t *testing.T) {
	ml := withT4Rule()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	warnings := func() int {
		n := 0
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, v1alpha1.ReasonRuleMatchesNoGPU) {
				n++
			}
		}
		return n
	}
	reconcileLayoutA(t, r)
	if n := warnings(); n != 1 {
		t.Fatalf("%d RuleMatchesNoGPU warnings, want 1", n)
	}
	if err := c.Delete(t.Context(), ml); err != nil {
		t.Fatal(err)
	}
	again := withT4Rule()
	again.UID = "uid-b"
	if err := c.Create(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	reconcileLayoutA(t, r)
	if n := warnings(); n != 1 {
		t.Errorf("%d RuleMatchesNoGPU warnings for the MigLayout made again, want 1", n)
	}
}

// relatedRecorder keeps the related object of each event recorded.
type relatedRecorder struct{ related []runtime.Object }

func (s *relatedRecorder) Eventf(_ runtime.Object, related runtime.Object, _, _, _, _ string, _ ...interface{}) {
	s.related = append(s.related, related)
}

// TestStaticEdgesRecordRelatesNodeEvents: an event about one node has the
// node's NodeMigLayout as its related object (so that the recorder does
// not fold two nodes' events into one series); an event about the
// MigLayout as a whole has none.
func TestStaticEdgesRecordRelatesNodeEvents(t *testing.T) {
	rec := &relatedRecorder{}
	r := &Reconciler{Recorder: rec}
	ml := staticMigLayout("a", "uid-a", "a")
	r.record(ml, []Event{
		{Type: "Normal", Reason: "Repartitioned", Action: "Repartition", Note: "n1 done", Node: "n1"},
		{Type: "Warning", Reason: v1alpha1.ReasonRuleMatchesNoGPU, Action: "CheckSpec", Note: "rule"},
	})
	var got []string
	for _, o := range rec.related {
		if o == nil {
			got = append(got, "")
			continue
		}
		got = append(got, o.(*v1alpha1.NodeMigLayout).Name)
	}
	if diff := cmp.Diff([]string{"n1", ""}, got); diff != "" {
		t.Errorf("related NodeMigLayouts (-want +got):\n%s", diff)
	}
}

// TestStaticEdgesDeletingReleaseErrorReturned: a MigLayout being deleted
// whose NodeMigLayout cannot be deleted returns the error, so that the
// reconcile is retried.
func TestStaticEdgesDeletingReleaseErrorReturned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := staticMigLayout("a", "uid-a", "a")
	a.Finalizers = []string{"example.com/hold"}
	base := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout)).build(), a)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	if err := base.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*v1alpha1.NodeMigLayout); ok {
				return errors.New("the API server is unavailable")
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err == nil {
		t.Error("reconciling a MigLayout being deleted whose NodeMigLayout cannot be deleted: no error, want one")
	}
}

// TestStaticEdgesDeletedLeaseOfNodeWithoutNodeMigLayoutForgotten: a node
// whose Lease was seen deleted and that has no NodeMigLayout any more
// (garbage-collected with its MigLayout) is forgotten by the next
// reconcile: once it gets a NodeMigLayout again and its agent reports
// without a Lease, it is judged as never seen, not lost on the strength of
// the old deletion.
func TestStaticEdgesDeletedLeaseOfNodeWithoutNodeMigLayoutForgotten(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &AgentLeases{Namespace: "miglayout-system", Now: func() time.Time { return now }}
	l.deleted("n9", "")
	now = now.Add(10 * time.Minute)
	a := staticMigLayout("a", "uid-a", "a")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), a)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: l}
	reconcileLayoutA(t, r)
	if h := l.Health("n9", nil, true, false); h.Lost {
		t.Errorf("n9, without a NodeMigLayout at the last reconcile, judged %+v, want not lost", h)
	}
}
