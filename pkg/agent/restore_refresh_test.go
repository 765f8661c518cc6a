package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRestoreRefreshesRecreated: a GPU reset with the agent running; the
// held device is made again by restoreHeld alone (the GPU's layout is the
// held device, or no spec lists the GPU), with a new UUID. The prepared
// claim's CDI spec is refreshed (RefreshRecreated), as after a pass's own
// creates, or its container could not restart.
func TestRestoreRefreshesRecreated(t *testing.T) {
	for name, desired := range map[string][]v1alpha1.GPUSpec{
		"listed, whole layout held": {spec(0, "7g.80gb@0")},
		"no spec":                   nil,
	} {
		t.Run(name, func(t *testing.T) {
			const held = "gpu-0-mig-7g80gb-0-0"
			g := newRig(t, "1xA100-SXM4-80GB")
			prep := &refreshingPrepared{fakePrepared: g.prep}
			g.r.Prepared = prep
			g.setup(t, 0, "7g.80gb@0")
			g.alloc.cached = sets.New(held)
			g.prep.names.Insert(held)
			if _, err := g.r.Sync(t.Context(), desired, nil); err != nil {
				t.Fatal(err)
			}
			before := prep.refreshes
			if err := g.sim.ResetGPU(0); err != nil {
				t.Fatal(err)
			}
			if _, err := g.r.Sync(t.Context(), desired, nil); err != nil {
				t.Fatal(err)
			}
			g.wantLayouts(t, "7g.80gb@0")
			if prep.refreshes == before {
				t.Errorf("device made again by restoreHeld, but RefreshRecreated not called (refreshes %d)", prep.refreshes)
			}
		})
	}
}
