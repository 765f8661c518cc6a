package gpu_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProfileTableWhileMIGModeIsPending: an A100 whose MIG mode is to be
// on after its next reset (held by a process when it was enabled) is
// still in MIG-off mode: it gets the table NVML gives with MIG mode off,
// so that a layout NVML would refuse is refused before the reset turns
// MIG mode on.
func TestProfileTableWhileMIGModeIsPending(t *testing.T) {
	sim := rightHalfSim(t)
	m := managerOver(t, sim, nil, "")
	if _, err := sim.StartProcess(sim.Snapshot().GPUs[0].UUID, 100); err != nil {
		t.Fatal(err)
	}
	mode, err := m.SetMIGMode(t.Context(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if mode.Current || !mode.Pending {
		t.Fatalf("SetMIGMode on the held A100 = %+v; want the change pending (the test does not bite)", mode)
	}
	if got := nvmlPlacements(t, m); !cmp.Equal(got, rightHalf3g) {
		t.Errorf("with MIG mode pending, NVML's 3g.40gb placements read as %v, want %v", got, rightHalf3g)
	}
}
