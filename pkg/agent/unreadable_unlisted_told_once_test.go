package agent

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestUnlistedUnreadableGPUIsToldOnce: a GPU the spec does not list that
// falls off the bus gets one GPUUnreadable warning; the passes after, while
// its status row already says so, record no other.
func TestUnlistedUnreadableGPUIsToldOnce(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		reconcileThenRead(t, r, c, req)
	}
	var told []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventGPUUnreadable) {
			told = append(told, e)
		}
	}
	if len(told) != 1 {
		t.Errorf("GPUUnreadable events over three passes with GPU 1 off the bus: %q, want one", told)
	}
}
