package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStatusUndoneBeforeTheCacheShowsIt: a pass writes a status (the node
// Draining), and the next, run before the cache shows that write, finds
// the node Ready again: the status it computes equals the cache's older
// copy, yet it is written, since the API server holds the one written in
// between (status writes wake no reconcile that would correct it).
func TestStatusUndoneBeforeTheCacheShowsIt(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	n := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, node("n1", map[string]string{"pool": "a"}), n).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	report := func(p v1alpha1.GPUPhase) {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
			t.Fatal(err)
		}
		nml.Status.GPUs = inventory(a100(0).layout(halvesLayout).phase(p, "", ""))
		if err := c.Status().Update(ctx, &nml); err != nil {
			t.Fatal(err)
		}
	}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	var ready v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &ready); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(ready.Status.Conditions, v1alpha1.ConditionReady) {
		t.Fatalf("first pass: not Ready: %+v", ready.Status.Conditions)
	}
	report(v1alpha1.PhaseDraining)
	reconcile()
	report(v1alpha1.PhaseReady)
	r.Client = &staleMigLayout{Client: c, ml: &ready} // the second pass's status write not delivered
	reconcile()
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) || got.Status.ReadyNodes != 1 {
		t.Errorf("the node is Ready again, but the stored status says Ready=%t readyNodes=%d (rows %+v)",
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady), got.Status.ReadyNodes, got.Status.Nodes)
	}
}
