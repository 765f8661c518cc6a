package nvmlsim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// go-nvml sizes the buffer of nvmlDeviceGetGpuInstances and
// nvmlGpuInstanceGetComputeInstances from the profile info the caller
// passes, and refuses an info whose InstanceCount is 0 before calling NVML
// at all (github.com/NVIDIA/go-nvml v0.13.4-1, pkg/nvml/device.go:
// nvmlDevice.GetGpuInstances and nvmlGpuInstance.GetComputeInstances:
// `if count == 0 { return nil, ERROR_INVALID_ARGUMENT }`). A caller that
// builds the info by hand ({Id: 19}) instead of reading it from
// GetGpuInstanceProfileInfo gets ERROR_INVALID_ARGUMENT on a real GPU,
// whatever instances exist.

// TestGetGpuInstancesRefusesInfoWithoutInstanceCount: Device.GetGpuInstances
// (and Interface.DeviceGetGpuInstances) with InstanceCount 0 return
// ERROR_INVALID_ARGUMENT, as go-nvml does, even where a GI of the profile
// exists.
func TestGetGpuInstancesRefusesInfoWithoutInstanceCount(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	info := nvml.GpuInstanceProfileInfo{Id: 19} // 1g.10gb, InstanceCount left 0
	gis, ret := d.GetGpuInstances(&info)
	wantRet(t, "GetGpuInstances({Id: 19}) with InstanceCount 0", ret, nvml.ERROR_INVALID_ARGUMENT)
	if ret == nvml.SUCCESS {
		t.Logf("the simulator listed %d GI(s) that go-nvml never asks NVML for", len(gis))
	}
	_, ret = s.DeviceGetGpuInstances(d, &info)
	wantRet(t, "DeviceGetGpuInstances({Id: 19}) with InstanceCount 0", ret, nvml.ERROR_INVALID_ARGUMENT)
}

// TestGetComputeInstancesRefusesInfoWithoutInstanceCount:
// GpuInstance.GetComputeInstances (and
// Interface.GpuInstanceGetComputeInstances) with InstanceCount 0 return
// ERROR_INVALID_ARGUMENT, as go-nvml does, even where a CI of the profile
// exists.
func TestGetComputeInstancesRefusesInfoWithoutInstanceCount(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	gi, _ := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	info := nvml.ComputeInstanceProfileInfo{Id: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE} // InstanceCount left 0
	cis, ret := gi.GetComputeInstances(&info)
	wantRet(t, "GetComputeInstances({Id: 1_SLICE}) with InstanceCount 0", ret, nvml.ERROR_INVALID_ARGUMENT)
	if ret == nvml.SUCCESS {
		t.Logf("the simulator listed %d CI(s) that go-nvml never asks NVML for", len(cis))
	}
	_, ret = s.GpuInstanceGetComputeInstances(gi, &info)
	wantRet(t, "GpuInstanceGetComputeInstances({Id: 1_SLICE}) with InstanceCount 0", ret, nvml.ERROR_INVALID_ARGUMENT)
}
