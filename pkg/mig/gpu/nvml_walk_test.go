package gpu_test

import (
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
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

// TestProfileNVMLDoesNotOffer: a catalog profile the GPU's NVML does not
// offer at all (GetGpuInstanceProfileInfo answers NOT_SUPPORTED) is a
// mismatch with no placements, so that nothing of it is planned or created.
func TestProfileNVMLDoesNotOffer(t *testing.T) {
	ctx := t.Context()
	a100 := model(t, "A100-SXM4-80GB")
	without, err := a100.WithNVMLPlacements(map[string][]mig.Placement{"1g.20gb": {}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hardware, err := mig.DefaultCatalog().With(without)
	if err != nil {
		t.Fatal(err)
	}
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
	enableMIG(t, ctx, sim, m, 0)
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1g.20gb (NVML profile index 9): NVML does not offer it on this GPU (ERROR_NOT_SUPPORTED)"}
	if diff := cmp.Diff(want, gpus[0].CatalogMismatches); diff != "" {
		t.Errorf("mismatches (-want +got):\n%s", diff)
	}
	if pls, ok := gpus[0].NVMLPlacements["1g.20gb"]; !ok || len(pls) != 0 {
		t.Errorf("NVML placements of 1g.20gb: %v (listed %v), want none listed", pls, ok)
	}
}
