package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestLeavingAutoModeSparesPodsGoneOrReplaced: of the pods the planner
// told why they wait, once the MigLayout turns Static, only the one still
// waiting hears that Auto mode no longer plans for it: not one being
// deleted, nor one deleted and made again under the same name (another
// pod, which the planner never told anything).
func TestLeavingAutoModeSparesPodsGoneOrReplaced(t *testing.T) {
	ctx := context.Background()
	ml := autoMigLayout("auto", nil)
	deleting := autoPod("deleting", h0(), "c2")
	deleting.Finalizers = []string{"example.com/hold"}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("waiting", h0(), "c1"),
		autoClaim("c2", profileSelector("3g.40gb")), deleting,
		autoClaim("c3", profileSelector("3g.40gb")), autoPod("replaced", h0(), "c3"))
	h.settle()
	if got := len(h.events()); got != 3 {
		t.Fatalf("%d events while in Auto mode, want one per pod: the test shows nothing", got)
	}
	if err := h.c.Delete(ctx, h.pod("deleting")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, h.pod("replaced")); err != nil {
		t.Fatal(err)
	}
	again := autoPod("replaced", h0(), "c3")
	again.UID = "uid-replaced-again"
	h.create(again)
	var live v1alpha1.MigLayout
	if err := h.c.Get(ctx, types.NamespacedName{Name: "auto"}, &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Mode, live.Spec.Policy = v1alpha1.ModeStatic, nil
	live.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2))
	if err := h.c.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Reconcile(ctx, autoKey); err != nil {
		t.Fatal(err)
	}
	var heard []string
	for _, e := range h.events() {
		if strings.Contains(e, EventNoLongerPlanned) {
			heard = append(heard, e)
		}
	}
	if len(heard) != 1 {
		t.Errorf("%s events %q, want one, for the pod still waiting", EventNoLongerPlanned, heard)
	}
}
