package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestAutoGPUsOnlyWithMIGModeSettled: Auto mode plans only on GPUs whose MIG
// mode is on and stays on: not on one whose MIG mode is off, nor on one
// whose MIG mode change is pending (it goes off, or comes on, at the GPU's
// next reset), since Auto mode never changes MIG mode.
func TestAutoGPUsOnlyWithMIGModeSettled(t *testing.T) {
	on := a100(0).layout("7g.80gb@0")
	goingOff := a100(1).layout("7g.80gb@0")
	goingOff.g.MIGPending = false
	comingOn := a100(2).migOff()
	comingOn.g.MIGPending = true
	off := a100(3).migOff()
	nml := nodeMigLayout("n1").status(on, goingOff, comingOn, off).build()
	var got []int
	for _, g := range autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false) {
		got = append(got, g.Info.Index)
	}
	if diff := cmp.Diff([]int{0}, got); diff != "" {
		t.Errorf("Auto GPUs (-want +got):\n%s", diff)
	}
}
