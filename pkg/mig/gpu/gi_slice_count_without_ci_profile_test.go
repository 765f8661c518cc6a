package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// fiveSliceDevice is a GPU describing its 3_SLICE GPU instance profile as
// one of 5 compute slices: a GI profile of a slice count no
// NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE index spans (a newer GPU's).
type fiveSliceDevice struct{ nvml.Device }

func (d fiveSliceDevice) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	info, ret := d.Device.GetGpuInstanceProfileInfo(profile)
	if ret == nvml.SUCCESS && profile == nvml.GPU_INSTANCE_PROFILE_3_SLICE {
		info.SliceCount = 5
	}
	return info, ret
}

// TestGIOfASliceCountWithoutCIProfile: a GPU instance of a profile whose
// slice count no compute-instance profile index spans is listed as one
// without a full-size compute instance (CIID -1), as a GI whose full-size
// profile NVML does not offer is, and can be destroyed; the GPU's other
// devices are still listed.
func TestGIOfASliceCountWithoutCIProfile(t *testing.T) {
	ctx := t.Context()
	three, one := mig.Device{Profile: "3g.40gb", Start: 4}, mig.Device{Profile: "1g.10gb", Start: 0}
	sim, _, _ := h100With(t, three, one)
	m := managerOver(t, devicesWrapped{sim, func(d nvml.Device) nvml.Device { return fiveSliceDevice{d} }}, nil, "")
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Errorf("MIGDevices with a 5-slice GPU instance = %v; want its devices listed", err)
	} else if len(devs) != 2 || devs[0].Device() != one || devs[1].Device() != three || devs[1].CIID != -1 {
		t.Errorf("MIGDevices = %+v; want %s, and %s without a full-size compute instance", devs, one, three)
	}
	if err := m.DestroyMIGDevice(ctx, 0, three); err != nil {
		t.Errorf("DestroyMIGDevice(%s) = %v; want it destroyed", three, err)
	}
	if got := simLayout(sim, 0).String(); got != "1g.10gb@0" {
		t.Errorf("simulator layout %q, want 1g.10gb@0", got)
	}
}
