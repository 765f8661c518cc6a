package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A slot held for a write the cache does not show ends rolloutExpectTTL
// after the write on the Reconciler's clock, and the pass that holds a
// node for it asks to look again one second after that: here 20 s after
// the write, 41 s on.
func TestHeldSlotLooksAgainWhenTheUnseenWriteIsForgotten(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	n1 := ownedBy(nodeMigLayout("n1").build(), ml)
	n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	now := h0()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	if specs := specsAfterReconcile(t, c, r, "n2"); specs["n2"] != halvesLayout {
		t.Fatalf("first pass: n2 %q, want %s", specs["n2"], halvesLayout)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Status.GPUs = []v1alpha1.GPUStatus{a100(0).layout(wholeLayout).build()}
	if err := c.Status().Update(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Second)
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n2": n2}}
	r.APIReader = c
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := rolloutExpectTTL - 20*time.Second + time.Second; res.RequeueAfter != want {
		t.Errorf("requeue after %v, want %v (the held slot's end on the Reconciler's clock, plus 1s)", res.RequeueAfter, want)
	}
}
