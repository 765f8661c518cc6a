package controller

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanWithAReclaimMadeAgainIsTold: while an idle GPU's reclaim is in
// flight (written, its agent not started yet), a plan that gives it back
// whole again writes nothing for it, and counts it as written all the
// same: the plan is not held back, and a pod no Auto GPU can serve hears
// so.
func TestPlanWithAReclaimMadeAgainIsTold(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](60)})
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("1g.10gb@0,2g.20gb@2,3g.40gb@4")))
	h.settle()
	h.now = h.now.Add(61 * time.Second)
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Fatalf("n1/gpu-0 -> %q, want 7g.80gb@0 (given back whole)", got)
	}
	h.events()
	h.create(autoClaim("c1", profileSelector("9g.99gb")), autoPod("p1", h.now, "c1"))
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Fatalf("n1/gpu-0 -> %q, want the reclaim 7g.80gb@0 still", got)
	}
	if events := h.events(); !containsAny(events, EventNotServable) {
		t.Errorf("events %q, want p1 told it is %s", events, EventNotServable)
	}
}
