package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestMaxNodesChangingDropWriteTakesNoSlot: maxNodesChanging 1 is set
// while n1 and n2 both drain toward halves; n1 keeps the slot and n2's
// unstarted change is dropped. That write holds n2 on what it holds: while
// the cache does not show it yet, n2 must not count as changing, or n1's
// change would be dropped too, and given again once the cache caught up
// (its spec written new, old, new).
func TestMaxNodesChangingDropWriteTakesNoSlot(t *testing.T) {
	c, r := wholeNodes(t, staticMigLayout("a", "uid-a", "a"), "n1", "n2")
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != halvesLayout {
		t.Fatalf("setup: %v", specs)
	}
	for _, n := range []string{"n1", "n2"} {
		setRow(t, c, n, a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "draining 7g.80gb@0").build())
	}
	setMaxNodesChanging(t, c, 1)
	var staleN2 v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n2"}, &staleN2); err != nil {
		t.Fatal(err)
	}
	specs := specsAfterReconcile(t, c, r, "n1", "n2")
	if specs["n1"] != halvesLayout || specs["n2"] != wholeLayout {
		t.Fatalf("pass 1: %v, want n1 kept, n2 dropped", specs)
	}
	// Next pass reads a cache that does not show n2's drop yet.
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n2": &staleN2}}
	r.APIReader = c
	specs = specsAfterReconcile(t, c, r, "n1", "n2")
	if specs["n1"] != halvesLayout {
		t.Errorf("pass 2 (cache behind n2's drop): n1 %q, want %s kept: its draining change was dropped because n2's drop write counts as a change in flight", specs["n1"], halvesLayout)
	}
	// The cache catches up: nothing moves.
	r.Client = c
	specs = specsAfterReconcile(t, c, r, "n1", "n2")
	if specs["n1"] != halvesLayout || specs["n2"] != wholeLayout {
		t.Errorf("pass 3: %v, want n1 kept on halves, n2 held", specs)
	}
}
