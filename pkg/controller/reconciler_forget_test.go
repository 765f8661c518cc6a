package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReconcileForgetsADeletedMigLayout: once a MigLayout is gone, what the
// reconciler remembered about it (the problems already announced, the spec
// problems kept, the status version last seen) is dropped, so that memory
// does not grow with MigLayouts made and deleted; other MigLayouts keep
// theirs.
func TestReconcileForgetsADeletedMigLayout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme()}
	for _, name := range []string{"gone", "other"} {
		r.problems = mapWith(r.problems, name, seenProblems{uid: "u", keys: sets.New("k")})
		r.specProblems = mapWith(r.specProblems, name, keptSpecProblems{uid: "u", generation: 1})
		r.statusSeen = mapWith(r.statusSeen, name, seenVersion{uid: "u", resourceVersion: "1"})
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "gone"}}); err != nil {
		t.Fatalf("Reconcile of a missing MigLayout: %v", err)
	}
	got := map[string][]string{
		"problems":     keysOf(r.problems),
		"specProblems": keysOf(r.specProblems),
		"statusSeen":   keysOf(r.statusSeen),
	}
	want := map[string][]string{
		"problems":     {"other"},
		"specProblems": {"other"},
		"statusSeen":   {"other"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MigLayouts remembered (-want +got):\n%s", diff)
	}
}

func mapWith[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

func keysOf[V any](m map[string]V) []string {
	return sets.List(sets.KeySet(m))
}
