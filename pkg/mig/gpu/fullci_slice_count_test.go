package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// wideREV1Device is a GPU whose new GPU instances describe their
// 1_SLICE_REV1 compute-instance profile as spanning one compute slice more
// than it does.
type wideREV1Device struct{ nvml.Device }

func (d wideREV1Device) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	gi, ret := d.Device.CreateGpuInstanceWithPlacement(info, pl)
	if ret != nvml.SUCCESS {
		return gi, ret
	}
	return wideREV1GI{gi}, ret
}

type wideREV1GI struct{ nvml.GpuInstance }

func (g wideREV1GI) GetComputeInstanceProfileInfo(profile, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	info, ret := g.GpuInstance.GetComputeInstanceProfileInfo(profile, eng)
	if ret == nvml.SUCCESS && profile == nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 {
		info.SliceCount++
	}
	return info, ret
}

// TestFullCIProfileSpansTheGIsSlices: a compute-instance profile beside
// the plain <N>_SLICE one is created only where NVML says it spans the GPU
// instance's N compute slices, however many multiprocessors it has: an
// H100 1g.20gb whose 1_SLICE_REV1 profile NVML describes as wider gets the
// plain 1_SLICE compute instance.
func TestFullCIProfileSpansTheGIsSlices(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.SimulatedOver(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()}, func(l nvml.Interface) nvml.Interface {
		return devicesWrapped{l, func(d nvml.Device) nvml.Device { return wideREV1Device{d} }}
	})
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.20gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	gis := sim.Snapshot().GPUs[0].GPUInstances
	if len(gis) != 1 || len(gis[0].ComputeInstances) != 1 {
		t.Fatalf("GPU instances %+v, want one with one compute instance", gis)
	}
	if got, want := gis[0].ComputeInstances[0].ProfileID, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE; got != want {
		t.Errorf("compute instance of CI profile %d, want %d (1_SLICE)", got, want)
	}
}
