package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRollbackKeepsHeldGIOfDestroyInFlight: the journal records the agent
// destroying 3g.40gb@4 when it stopped (its compute instance gone, its GPU
// instance left), and a claim holds the device's name. Only a create in
// flight is rolled back whatever holds it; the GPU instance of a destroy
// half done whose name is held stays, Blocked, until the claim lets go.
func TestRollbackKeepsHeldGIOfDestroyInFlight(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	for name, hold := range map[string]func(g *rig){
		"allocated": func(g *rig) { g.alloc.cached, g.alloc.live = sets.New(held), sets.New(held) },
		"prepared":  func(g *rig) { g.prep.names.Insert(held) },
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			hold(g)
			g.removeCI(t, 0, 4)
			if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepDestroying,
				Desired: "3g.40gb@0", Destroy: []string{"3g.40gb@4"}}); err != nil {
				t.Fatal(err)
			}
			before := g.sim.Snapshot().GPUs[0].GPUInstances
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, g.sim.Snapshot().GPUs[0].GPUInstances); diff != "" {
				t.Errorf("GPU instances changed: the held GPU instance of the destroy in flight was destroyed (or made again) (-before +after):\n%s", diff)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || !strings.Contains(got.Message, held) {
				t.Errorf("result %+v, want Blocked naming %s", got, held)
			}
		})
	}
}
