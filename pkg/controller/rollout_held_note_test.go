package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestHeldNoteNamesTheBoundAndTheNodesChanging: a held node's row says the
// bound (spec.maxNodesChanging) and how many nodes change now, each number
// in its place, and names the first three nodes holding a slot: the bound
// was lowered to 3 while 5 nodes change.
func TestHeldNoteNamesTheBoundAndTheNodesChanging(t *testing.T) {
	g := &rolloutGate{max: 3, changing: 5, slots: []string{"n1", "n2 (gpu 0 Blocked, DeviceInUse)", "n3", "n4", "n5"}}
	want := "waits its turn: at most 3 node(s) change at once (spec.maxNodesChanging), 5 changing now: n1, n2 (gpu 0 Blocked, DeviceInUse), n3 and 2 more"
	if diff := cmp.Diff(want, g.heldNote()); diff != "" {
		t.Errorf("held note (-want +got):\n%s", diff)
	}
}

// TestHeldNoteNamesTheNodeGivenTheSlotThisPass: with maxNodesChanging 1
// and every node at its layout, n1 is given a new layout and takes the
// slot; n2, held, is told n1 holds it.
func TestHeldNoteNamesTheNodeGivenTheSlotThisPass(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	var nodes []*v1alpha1.NodeMigLayout
	for _, n := range []string{"n1", "n2"} {
		nodes = append(nodes, nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build())
	}
	g := newRolloutGate(ml, nodes, nil, nil)
	halves := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}
	if first, second := g.admit(nodes[0], halves), g.admit(nodes[1], halves); !first || second {
		t.Fatalf("n1 admitted %t, n2 admitted %t; want only n1: the test shows nothing", first, second)
	}
	want := "waits its turn: at most 1 node(s) change at once (spec.maxNodesChanging), 1 changing now: n1"
	if diff := cmp.Diff(want, g.heldNote()); diff != "" {
		t.Errorf("held note (-want +got):\n%s", diff)
	}
}
