package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestDeletingAutoMigLayoutRetracts: an Auto MigLayout whose deletion waits
// on a finalizer (foreground deletion, a GitOps tool's) is no longer
// planned for: its pods are told once that Auto mode plans no GPU for them
// any more, never that no Auto node reported a GPU (its nodes did), and
// the status counts nothing for it.
func TestDeletingAutoMigLayoutRetracts(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	ml.Finalizers = []string{"example.com/hold"}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if got := h.events(); !containsAny(got, EventWaitingForRepartition) {
		t.Fatalf("before the deletion p1 was told %q, want %s", got, EventWaitingForRepartition)
	}
	if err := h.c.Delete(context.Background(), ml); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.settle()
	got := h.events()
	if containsAny(got, planner.NoAutoNode) {
		t.Errorf("p1 warned that no Auto node exists while its MigLayout is being deleted: %q", got)
	}
	if n := countContaining(got, EventNoLongerPlanned); n != 1 {
		t.Errorf("p1 told %s %d times, want once: %q", EventNoLongerPlanned, n, got)
	}
	if st := h.autoStatus(); st != nil && st.PendingPods+st.WaitingForRepartitionPods+st.NotServablePods > 0 {
		t.Errorf("Auto status of a MigLayout being deleted counts pods: %+v", st)
	}
}

func containsAny(events []string, s string) bool { return countContaining(events, s) > 0 }

func countContaining(events []string, s string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}
