package mig

import (
	"math/rand/v2"
	"testing"
)

// TestHeadroomAgreesWithValidate: Headroom, which the planner ranks
// layouts by (the room left for large profiles), counts for each profile
// exactly the placements at which Validate accepts one more instance of
// it beside the layout (and Validate agrees with NVML's refusals,
// TestCatalogAgreesWithSimulatedNVML), on every maximal layout of every
// catalogued model with each of its devices left out in turn, and on
// seeded random sub-layouts of them.
func TestHeadroomAgreesWithValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, m := range DefaultCatalog().Models() {
		order := m.profilesLargestFirst()
		check := func(l Layout) {
			t.Helper()
			got := m.Headroom(l)
			for i, p := range order {
				want := 0
				for _, pl := range p.Placements {
					if m.Validate(append(l[:len(l):len(l)], Device{Profile: p.Name, Start: pl.Start})) == nil {
						want++
					}
				}
				if got[i] != want {
					t.Fatalf("%s: Headroom(%s) gives %s %d placements; Validate accepts %d", m.Name, l, p.Name, got[i], want)
				}
			}
		}
		checked := 0
		for _, full := range m.MaximalLayouts() {
			check(full)
			for i := range full {
				check(append(full[:i:i], full[i+1:]...))
			}
			var sub Layout
			for _, d := range full {
				if rng.IntN(2) == 0 {
					sub = append(sub, d)
				}
			}
			check(sub)
			checked += len(full) + 2
		}
		if checked == 0 {
			t.Fatalf("%s: no layout checked", m.Name)
		}
	}
}
