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
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// genBumping bumps a NodeMigLayout's metadata.generation on a patch that
// changes its spec, as the API server does (the fake client does not).
type genBumping struct{ client.Client }

func (c *genBumping) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	nml, ok := obj.(*v1alpha1.NodeMigLayout)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	var before v1alpha1.NodeMigLayout
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), &before); err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(before.Spec, nml.Spec) {
		nml.Generation = before.Generation + 1
		return c.Client.Update(ctx, nml)
	}
	return nil
}

// TestMaxNodesChangingAdoptionWriteExpected: n2's NodeMigLayout is an
// orphan whose spec (halves) its agent has not started (Ready on whole).
// MigLayout a (halves, maxNodesChanging 1) adopts it and gives it the
// slot: the adoption write leaves spec.gpus as they were, but it starts a
// change the gate judged without (startedOnly drops another owner's
// unstarted changes), so it is expected as one. n1's agent then reports;
// the next pass reads a cache that still shows n2 as the orphan, while
// n2's agent, which sees the written spec, has begun: n2 still holds the
// slot, and n1 waits.
func TestMaxNodesChangingAdoptionWriteExpected(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	orphan := nodeMigLayout("n2").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout)).build()
	orphan.Spec.MigLayout = "gone"
	n1 := ownedBy(nodeMigLayout("n1").build(), ml)
	orphan.Generation, n1.Generation = 1, 1
	fc := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, orphan).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	c := &genBumping{Client: fc}
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	var stale v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n2"}, &stale); err != nil {
		t.Fatal(err)
	}
	if specs := specsAfterReconcile(t, c, r, "n2"); specs["n2"] != halvesLayout {
		t.Fatalf("pass 1: n2 %q, want %s (adopted, given the slot)", specs["n2"], halvesLayout)
	}
	// n2's agent begins; n1's agent reports its whole GPU.
	for n, st := range map[string]*gpuBuilder{
		"n2": a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", ""),
		"n1": a100(0).layout(wholeLayout),
	} {
		var got v1alpha1.NodeMigLayout
		if err := c.Get(context.Background(), types.NamespacedName{Name: n}, &got); err != nil {
			t.Fatal(err)
		}
		got.Status.GPUs = inventory(st)
		if err := c.Status().Update(context.Background(), &got); err != nil {
			t.Fatal(err)
		}
	}
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n2": &stale}}
	r.APIReader = c
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatalf("pass 2: %v", err)
	}
	var g1, g2 v1alpha1.NodeMigLayout
	for name, into := range map[string]*v1alpha1.NodeMigLayout{"n1": &g1, "n2": &g2} {
		if err := c.Get(context.Background(), types.NamespacedName{Name: name}, into); err != nil {
			t.Fatal(err)
		}
	}
	l1 := ""
	if len(g1.Spec.GPUs) > 0 {
		l1 = g1.Spec.GPUs[0].Layout
	}
	t.Logf("after pass 2: n1 %q, n2 %q (n2 repartitioning)", l1, g2.Spec.GPUs[0].Layout)
	if l1 == halvesLayout {
		t.Errorf("n1 given %s while adopted n2 repartitions to %s (its adoption write not yet in the cache): two nodes changing under maxNodesChanging 1", l1, g2.Spec.GPUs[0].Layout)
	}
}
