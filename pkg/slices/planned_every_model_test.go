package slices

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// The planner judges claims on devices PlannedMIGDevice builds from the
// catalog; the scheduler allocates the devices MIGDevice builds from what
// NVML reports once they exist. For every catalogued model, every profile
// at every placement, the two are the same device but for its UUID (its
// memory, engines, counters and name included), so no claim fits a planned
// device and then refuses the real one.
func TestPlannedMatchesRealEveryModel(t *testing.T) {
	gputest.EveryModel(t, func(t *testing.T, model *mig.Model, _ *nvmlsim.Sim, m *gpu.NVMLManager) {
		ctx := t.Context()
		if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
			t.Fatal(err)
		}
		compared := 0
		for _, p := range model.Profiles {
			for _, pl := range p.Placements {
				d := mig.Device{Profile: p.Name, Start: pl.Start}
				if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
					t.Fatalf("creating %s: %v", d, err)
				}
				inv, err := ReadInventory(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(inv.MIGs[0]); n != 1 {
					t.Fatalf("after creating %s the GPU lists %d MIG devices, want 1", d, n)
				}
				g, real := inv.GPUs[0], inv.MIGs[0][0]
				planned, err := PlannedMIGDevice(g, d)
				if err != nil {
					t.Fatalf("planning %s: %v", d, err)
				}
				want := MIGDevice(g, real)
				if u := want.Attributes[AttrUUID].StringValue; u == nil || *u != real.UUID || real.UUID == PlannedUUID {
					t.Fatalf("%s: the real device's UUID attribute is %v, NVML's %q", d, u, real.UUID)
				}
				want.Attributes[AttrUUID] = planned.Attributes[AttrUUID]
				if diff := cmp.Diff(want, planned); diff != "" {
					t.Errorf("planned %s differs from the real device (-real +planned):\n%s", d, diff)
				}
				if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
					t.Fatalf("destroying %s: %v", d, err)
				}
				compared++
			}
		}
		if compared == 0 {
			t.Fatal("the model has no profile placement to compare")
		}
	})
}
