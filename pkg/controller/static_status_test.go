package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStaticEdgesStaleCacheNoRepeatedEvents: a pass records the events of
// a change (n1 repartitioned: Repartitioning, then Ready) with its status
// write; the next pass, run while the cache still shows the status from
// before that write and with nothing changed since, finds the live status
// as it computes it and writes nothing: it records none of those events
// again.
func TestStaticEdgesStaleCacheNoRepeatedEvents(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	n := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, node("n1", map[string]string{"pool": "a"}), n).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: rec}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	reconcile := func() int {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for len(rec.Events) > 0 {
			<-rec.Events
			n++
		}
		return n
	}
	reconcile()
	var repartitioning v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &repartitioning); err != nil {
		t.Fatal(err)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Status.GPUs = inventory(a100(0).layout(halvesLayout))
	if err := c.Status().Update(ctx, &nml); err != nil {
		t.Fatal(err)
	}
	if n := reconcile(); n == 0 {
		t.Fatal("n1 repartitioned: no event recorded, want the change told")
	}
	r.Client = &staleMigLayout{Client: c, ml: &repartitioning} // the status write before not in the cache yet
	if n := reconcile(); n != 0 {
		t.Errorf("%d events recorded again by a pass that changed nothing, want none", n)
	}
}

// TestStaticEdgesForgottenRolloutExpectations: once the expectations of a
// MigLayout are forgotten (it is no longer bounded), a write they named
// no longer counts as in flight, though the cache does not show it yet.
func TestStaticEdgesForgottenRolloutExpectations(t *testing.T) {
	var e rolloutExpectations
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.expect("uid-a", "n1", []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}, "", 3, now)
	cached := nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).build()
	cached.Generation = 2
	e.forget("uid-a")
	if got, _ := e.unseen("uid-a", map[string]*v1alpha1.NodeMigLayout{"n1": cached}, now); len(got) != 0 {
		t.Errorf("unseen after forget: %v, want none", got)
	}
}

// TestStaticEdgesNoStatusFromOlderGeneration: a pass that works from a
// cached MigLayout older than the one the API server has (its spec edited
// since) writes no status: the status it computed is for a generation
// that is gone, and the edit brings a pass of its own.
func TestStaticEdgesNoStatusFromOlderGeneration(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Generation = 1
	n := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, node("n1", map[string]string{"pool": "a"}), n).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	var old v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &old); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Status.GPUs = inventory(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseDraining, "", ""))
	if err := c.Status().Update(ctx, &nml); err != nil {
		t.Fatal(err)
	}
	var live v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &live); err != nil {
		t.Fatal(err)
	}
	live.Generation = 2
	live.Spec.Rules = append(live.Spec.Rules, rule("whole").counts("7g.80gb", 1).build())
	if err := c.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, &live); err != nil {
		t.Fatal(err)
	}
	if live.Generation < 2 {
		t.Fatalf("live MigLayout at generation %d, want it edited since generation 1", live.Generation)
	}
	r.Client = &staleMigLayout{Client: c, ml: &old} // the cache still at generation 1
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != live.ResourceVersion {
		t.Errorf("status written from generation 1 over generation 2 (rows %+v), want it left as it was", got.Status.Nodes)
	}
}
