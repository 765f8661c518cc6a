package mig

import (
	"errors"
	"testing"
)

// TestInstanceBudgetOnItsOwn: on a made-up model whose instance limit is
// below its compute slices, the instance limit alone refuses a fourth GPU
// instance, in Validate and in Fit.
func TestInstanceBudgetOnItsOwn(t *testing.T) {
	m := &Model{Name: "test", MemoryMiB: 8, MemorySlices: 8, ComputeSlices: 7, MaxInstances: 3, Profiles: []Profile{
		{Name: "1g.1gb", ID: 1, ComputeSlices: 1, MemorySlices: 1, MaxCount: 3, MemoryMiB: 1, Placements: []Placement{{0, 1}, {1, 1}, {2, 1}, {3, 1}}},
		{Name: "2g.2gb", ID: 2, ComputeSlices: 2, MemorySlices: 2, MaxCount: 2, MemoryMiB: 2, Placements: []Placement{{4, 2}, {6, 2}}},
	}}
	if err := m.init(); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(MustParseLayout("1g.1gb@0,1g.1gb@1,2g.2gb@4,2g.2gb@6")); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("Validate of 4 GPU instances = %v, want ErrInvalidLayout", err)
	}
	if _, err := m.Fit(FitRequest{Want: map[string]int{"1g.1gb": 2, "2g.2gb": 2}}); !errors.Is(err, ErrDoesNotFit) {
		t.Errorf("Fit of 4 GPU instances = %v, want ErrDoesNotFit", err)
	}
}
