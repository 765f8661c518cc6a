package gpu_test

import (
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestWalkFailsOnTransientErrorOfAnExtraIndex: a transient NVML error
// (ERROR_UNKNOWN) while reading the GI profile index of a GPU instance that
// exists (a 1g.10gb-me the catalog lacks) fails MIGDevices rather than
// leaving that instance out: the agent would republish the pool without
// it (withdrawing a device a claim may hold) and count its memory slice
// free.
func TestWalkFailsOnTransientErrorOfAnExtraIndex(t *testing.T) {
	ctx := t.Context()
	sim, m := newUncataloguedSim(t)
	// The walk's call order (profileIndices): the catalog's indices, then
	// every other index; fail the call for 1_SLICE_NO_ME once.
	var order []int
	for _, p := range model(t, "A100-SXM4-80GB").Profiles {
		order = append(order, p.NVMLProfile)
	}
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	nth := slices.Index(order, nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME) + 1
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: nth, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	devs, err := m.MIGDevices(ctx, 0)
	var got []string
	for _, d := range devs {
		got = append(got, d.Device().String())
	}
	if err == nil && !slices.Contains(got, "1g.10gb-me@6") {
		t.Errorf("MIGDevices = %q, nil error: the live 1g.10gb-me@6 vanished on a transient ERROR_UNKNOWN", got)
	}
	// Without the fault it is there.
	devs, err = m.MIGDevices(ctx, 0)
	if err != nil || len(devs) != 2 {
		t.Fatalf("after the fault: %v %v", devs, err)
	}
}
