package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestMaxNodesChangingWriteOfWhatIsHeldTakesNoSlot: n1's GPU holds halves
// already (partitioned before the MigLayout), its spec lists nothing yet;
// n2's spec asks halves, not started (Ready on whole), within
// maxNodesChanging 1. Pass 1 writes n1's spec (halves), which starts
// nothing on n1: it is not expected as a change in flight, so the next
// pass, whose cache does not show n1's write yet, leaves n2's change as
// it is rather than dropping it beyond the bound.
func TestMaxNodesChangingWriteOfWhatIsHeldTakesNoSlot(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	n1 := ownedBy(nodeMigLayout("n1").status(a100(0).layout(halvesLayout)).build(), ml)
	n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
	n1.Generation, n2.Generation = 1, 1
	fc := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	c := &genBumping{Client: fc}
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	var stale v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &stale); err != nil {
		t.Fatal(err)
	}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n1"] != halvesLayout || specs["n2"] != halvesLayout {
		t.Fatalf("pass 1: %v, want both %s", specs, halvesLayout)
	}
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n1": &stale}}
	r.APIReader = c
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatalf("pass 2: %v", err)
	}
	var g2 v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n2"}, &g2); err != nil {
		t.Fatal(err)
	}
	if g2.Spec.GPUs[0].Layout != halvesLayout {
		t.Errorf("pass 2: n2's unstarted change, within the bound, dropped (%q, reason %q): n1's write, which started nothing, was expected as a change in flight", g2.Spec.GPUs[0].Layout, g2.Spec.GPUs[0].Reason)
	}
}
