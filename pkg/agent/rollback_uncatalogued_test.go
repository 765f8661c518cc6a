package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRollbackLeavesUncataloguedGPU: a GPU instance without a full-size
// compute instance on a GPU the spec lists but whose model the catalog
// lacks (so the spec cannot own its layout), and that the journal does not
// record the agent making, is left as it is: perhaps an administrator's,
// split into smaller compute instances.
func TestRollbackLeavesUncataloguedGPU(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	g.orphan3g(t, 0, 4)
	obs, unreadable, err := g.r.observe(t.Context())
	if err != nil || len(unreadable) > 0 {
		t.Fatal(err, unreadable)
	}
	obs[0].GPU.Model = nil // a model the catalog lacks
	rolled, failed, err := g.r.rollbackOrphans(t.Context(), obs, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")})
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	if rolled {
		t.Errorf("rolled back a GPU instance on an uncatalogued GPU, want it left")
	}
	if n := len(g.gis3g(t, 0)); n != 2 {
		t.Errorf("%d 3g GPU instances left, want 2 (the one without its compute instance kept)", n)
	}
}
