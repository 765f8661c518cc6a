package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestMaxNodesChangingSetMidRolloutHoldsUnstartedChanges: MigLayout a (no bound)
// gave n1-n3 halves; n1 repartitions, n2 drains (nothing destroyed), n3's
// agent has not started. The operator sets maxNodesChanging 1 to slow the
// rollout down. As for nodes taken over from another MigLayout
// (TestMaxNodesChangingAdoptsUnstartedChangesOneAtATime), n1 goes on and
// n2, n3, whose changes have not started, are held on what they hold,
// their specs saying why; once n1 is done, n2 gets the slot.
func TestMaxNodesChangingSetMidRolloutHoldsUnstartedChanges(t *testing.T) {
	c, r := wholeNodes(t, staticMigLayout("a", "uid-a", "a"), "n1", "n2", "n3")
	if specs := specsAfterReconcile(t, c, r, "n1", "n2", "n3"); specs["n3"] != halvesLayout {
		t.Fatalf("setup: %v", specs)
	}
	setRow(t, c, "n1", a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, "", "").build())
	setRow(t, c, "n2", a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "draining 7g.80gb@0").build())
	setMaxNodesChanging(t, c, 1)
	specs := specsAfterReconcile(t, c, r, "n1", "n2", "n3")
	want := map[string]string{"n1": halvesLayout, "n2": wholeLayout, "n3": wholeLayout}
	if diff := cmp.Diff(want, specs); diff != "" {
		t.Errorf("specs after maxNodesChanging 1 was set, n1 repartitioning, n2 draining, n3 not started (-want +got):\n%s", diff)
	}
	var n2 v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n2"}, &n2); err != nil {
		t.Fatal(err)
	}
	if why := n2.Spec.GPUs[0].Reason; !strings.Contains(why, "maxNodesChanging") || !strings.Contains(why, "dropped before it started") {
		t.Errorf("n2's spec reason %q, want it to say its change was dropped before it started, beyond maxNodesChanging", why)
	}
	// n1 is done: the slot goes to n2, and n3 waits.
	setRow(t, c, "n1", a100(0).layout(halvesLayout).build())
	specs = specsAfterReconcile(t, c, r, "n1", "n2", "n3")
	want = map[string]string{"n1": halvesLayout, "n2": halvesLayout, "n3": wholeLayout}
	if diff := cmp.Diff(want, specs); diff != "" {
		t.Errorf("specs once n1 is done (-want +got):\n%s", diff)
	}
}

// TestMaxNodesChangingHandEditedHeldNodeGetsNoTurn: maxNodesChanging 1, n1 holds the
// slot; n2 is held on 7g.80gb. Someone edits n2's NodeMigLayout spec by
// hand (its agent has not started on it). The controller must not answer
// by writing the rules' new layout to n2, a second node changing.
func TestMaxNodesChangingHandEditedHeldNodeGetsNoTurn(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	c, r := wholeNodes(t, ml, "n1", "n2")
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n1"] != halvesLayout || specs["n2"] != wholeLayout {
		t.Fatalf("setup: %v", specs)
	}
	var n2 v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n2"}, &n2); err != nil {
		t.Fatal(err)
	}
	n2.Spec.GPUs[0].Layout = "4g.40gb@0"
	if err := c.Update(context.Background(), &n2); err != nil {
		t.Fatal(err)
	}
	// A fresh reconciler (as after a restart): the fake client keeps no
	// generation, so the first one's expectations would count n2 anyway.
	r = &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	specs := specsAfterReconcile(t, c, r, "n1", "n2")
	if specs["n2"] == halvesLayout {
		t.Errorf("specs %v: n2 (hand-edited, not started) given the rules' new layout while n1 holds the only slot", specs)
	}
}

// wholeNodes is a fake cluster of ml and the given nodes, each selected by
// ml with a NodeMigLayout ml owns whose GPU 0, an A100, holds and is asked
// for the whole GPU; and a reconciler of it.
func wholeNodes(t *testing.T, ml *v1alpha1.MigLayout, nodes ...string) (client.Client, *Reconciler) {
	t.Helper()
	objs := []client.Object{ml}
	for _, n := range nodes {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
}

// setMaxNodesChanging sets MigLayout a's spec.maxNodesChanging to max.
func setMaxNodesChanging(t *testing.T, c client.Client, max int32) {
	t.Helper()
	var got v1alpha1.MigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.MaxNodesChanging = ptr.To(max)
	if err := c.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
}
