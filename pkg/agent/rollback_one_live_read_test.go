package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRollbackAsksTheAPIServerOnce: rolling back two GPU instances without
// their compute instances reads the allocations from the API server once,
// not once per GPU instance.
func TestRollbackAsksTheAPIServerOnce(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	g.orphan3g(t, 0, 0)
	g.orphan3g(t, 0, 4)
	obs, unreadable, err := g.r.observe(t.Context())
	if err != nil || len(unreadable) > 0 {
		t.Fatal(err, unreadable)
	}
	rolled, failed, err := g.r.rollbackOrphans(t.Context(), obs, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")})
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	if !rolled || len(g.gis3g(t, 0)) != 0 {
		t.Fatalf("rolled back %t, %d 3g GPU instances left; want both rolled back", rolled, len(g.gis3g(t, 0)))
	}
	if g.alloc.liveReads != 1 {
		t.Errorf("%d live reads of the allocations, want 1", g.alloc.liveReads)
	}
}
