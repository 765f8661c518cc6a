package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestCreatesTheCIWithAllTheGIsMultiprocessors: a 1g.20gb of an H100 gets
// the compute instance of profile 1_SLICE_REV1, with all 26 of the GPU
// instance's multiprocessors (1_SLICE has a 1g.10gb's 16), as nvidia-smi
// mig -cgi 15 -C makes it; an A100's 1g.20gb, whose GPU instance has a
// 1g's multiprocessors, the plain 1_SLICE one.
func TestCreatesTheCIWithAllTheGIsMultiprocessors(t *testing.T) {
	for name, tc := range map[string]struct {
		spec    string
		wantCI  int
		wantSMs int
	}{
		"H100 1g.20gb": {spec: "1xH100-SXM5-80GB", wantCI: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, wantSMs: 26},
		"A100 1g.20gb": {spec: "1xA100-SXM4-80GB", wantCI: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, wantSMs: 14},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: tc.spec, Seed: t.Name()})
			if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
				t.Fatal(err)
			}
			d, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.20gb", Start: 0})
			if err != nil {
				t.Fatal(err)
			}
			gis := sim.Snapshot().GPUs[0].GPUInstances
			if len(gis) != 1 || len(gis[0].ComputeInstances) != 1 {
				t.Fatalf("GPU instances %+v, want one with one compute instance", gis)
			}
			if got := gis[0].ComputeInstances[0].ProfileID; got != tc.wantCI || d.Multiprocessors != tc.wantSMs {
				t.Errorf("compute instance of CI profile %d, device with %d multiprocessors; want profile %d, %d", got, d.Multiprocessors, tc.wantCI, tc.wantSMs)
			}
		})
	}
}

// TestListsAFullWidthCIOfEitherProfile: a 1g.20gb of an H100 whose
// compute instance another tool made, of profile 1_SLICE_REV1 (nvidia-smi)
// or 1_SLICE (a tool taking the <N>_SLICE profile, or an older agent), is
// a MIG device with its UUID, not a GPU instance without compute instance
// (which the agent would destroy as left half made). It has the GPU
// instance profile's values, as the planner plans the device.
func TestListsAFullWidthCIOfEitherProfile(t *testing.T) {
	for name, tc := range map[string]struct {
		ciProfile int
		wantSMs   int
	}{
		"1_SLICE_REV1": {ciProfile: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, wantSMs: 26},
		"1_SLICE":      {ciProfile: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, wantSMs: 26},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
			if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
				t.Fatal(err)
			}
			gi := gputest.CreateGPUInstance(t, sim, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 2, 2)
			ciInfo, ret := gi.GetComputeInstanceProfileInfo(tc.ciProfile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			if ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			devs, err := m.MIGDevices(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != 1 || devs[0].Profile != "1g.20gb" || devs[0].CIID < 0 || devs[0].UUID == "" || devs[0].Multiprocessors != tc.wantSMs {
				t.Errorf("MIG devices %+v, want one 1g.20gb with its compute instance, UUID and %d multiprocessors", devs, tc.wantSMs)
			}
		})
	}
}
