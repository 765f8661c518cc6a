package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlannerWriteToObjectMadeAgainHoldsNothing: the planner's write is
// waited for on the object it was made on. Deleted and made again (a node
// handed to another MigLayout, or deleted by hand as the README says), the
// new object starts over at generation 1, below the write's: the pass must
// not wait for that write until it expires, which held Auto planning for
// every node of the cluster for a minute.
func TestPlannerWriteToObjectMadeAgainHoldsNothing(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	first := autoNML("n1", ml, a100(0).layout("7g.80gb@0"))
	first.UID = "uid-first"
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), first)
	h.create(autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h.now, "c1"))
	h.settle()
	written := h.nml("n1")
	if len(written.Spec.GPUs) == 0 {
		t.Fatal("the planner wrote no spec for n1")
	}
	h.a.written.mu.Lock()
	x, ok := h.a.written.m[autoWrites]["n1"]
	h.a.written.mu.Unlock()
	if !ok || x.uid != "uid-first" {
		t.Fatalf("the write is expected on object %q (expected: %t), want uid-first", x.uid, ok)
	}
	// The write as the API server would have numbered it, the object then
	// deleted and made again.
	h.a.written.expect(autoWrites, "n1", written.Spec.GPUs, written.UID, 7, h.now)
	again := autoNML("n1", ml, a100(0).layout("7g.80gb@0"))
	again.UID, again.Generation = types.UID("uid-made-again"), 1
	wait, err := h.a.cacheShowsWrites(context.Background(), map[string]*v1alpha1.NodeMigLayout{"n1": again})
	if err != nil {
		t.Fatal(err)
	}
	if wait != 0 {
		t.Errorf("the pass waits %v for a write to the object deleted since", wait)
	}
	// The object written, still behind the write, is waited for.
	h.a.written.expect(autoWrites, "n1", written.Spec.GPUs, written.UID, 7, h.now)
	behind := written.DeepCopy()
	behind.Generation = 6
	if wait, err := h.a.cacheShowsWrites(context.Background(), map[string]*v1alpha1.NodeMigLayout{"n1": behind}); err != nil || wait == 0 {
		t.Errorf("the pass does not wait for the cache to show the write on the object written (wait %v, err %v)", wait, err)
	}
}
