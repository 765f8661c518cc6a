package nvmlsim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The nvml.Interface forms of the handle methods: each calls the method on
// the handle, as go-nvml does, and answers ERROR_INVALID_ARGUMENT for a nil
// handle. See the handle methods (device.go, gpuinstance.go,
// computeinstance.go) for what each returns.

// ComputeInstanceDestroy calls h.Destroy.
func (s *Sim) ComputeInstanceDestroy(h nvml.ComputeInstance) nvml.Return {
	if h == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return h.Destroy()
}

// ComputeInstanceGetInfo calls h.GetInfo.
func (s *Sim) ComputeInstanceGetInfo(h nvml.ComputeInstance) (nvml.ComputeInstanceInfo, nvml.Return) {
	if h == nil {
		return nvml.ComputeInstanceInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetInfo()
}

// DeviceCreateGpuInstance calls h.CreateGpuInstance.
func (s *Sim) DeviceCreateGpuInstance(h nvml.Device, arg *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.CreateGpuInstance(arg)
}

// DeviceCreateGpuInstanceWithPlacement calls h.CreateGpuInstanceWithPlacement.
func (s *Sim) DeviceCreateGpuInstanceWithPlacement(h nvml.Device, arg *nvml.GpuInstanceProfileInfo, arg2 *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.CreateGpuInstanceWithPlacement(arg, arg2)
}

// DeviceGetArchitecture calls h.GetArchitecture.
func (s *Sim) DeviceGetArchitecture(h nvml.Device) (nvml.DeviceArchitecture, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetArchitecture()
}

// DeviceGetBrand calls h.GetBrand.
func (s *Sim) DeviceGetBrand(h nvml.Device) (nvml.BrandType, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetBrand()
}

// DeviceGetComputeInstanceId calls h.GetComputeInstanceId.
func (s *Sim) DeviceGetComputeInstanceId(h nvml.Device) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeInstanceId()
}

// DeviceGetComputeRunningProcesses calls h.GetComputeRunningProcesses.
func (s *Sim) DeviceGetComputeRunningProcesses(h nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeRunningProcesses()
}

// DeviceGetCudaComputeCapability calls h.GetCudaComputeCapability.
func (s *Sim) DeviceGetCudaComputeCapability(h nvml.Device) (int, int, nvml.Return) {
	if h == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetCudaComputeCapability()
}

// DeviceGetDeviceHandleFromMigDeviceHandle calls h.GetDeviceHandleFromMigDeviceHandle.
func (s *Sim) DeviceGetDeviceHandleFromMigDeviceHandle(h nvml.Device) (nvml.Device, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetDeviceHandleFromMigDeviceHandle()
}

// DeviceGetGpuInstanceById calls h.GetGpuInstanceById.
func (s *Sim) DeviceGetGpuInstanceById(h nvml.Device, arg int) (nvml.GpuInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstanceById(arg)
}

// DeviceGetGpuInstanceId calls h.GetGpuInstanceId.
func (s *Sim) DeviceGetGpuInstanceId(h nvml.Device) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstanceId()
}

// DeviceGetGpuInstancePossiblePlacements calls h.GetGpuInstancePossiblePlacements.
func (s *Sim) DeviceGetGpuInstancePossiblePlacements(h nvml.Device, arg *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstancePossiblePlacements(arg)
}

// DeviceGetGpuInstanceProfileInfo calls h.GetGpuInstanceProfileInfo.
func (s *Sim) DeviceGetGpuInstanceProfileInfo(h nvml.Device, arg int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if h == nil {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstanceProfileInfo(arg)
}

// DeviceGetGpuInstanceRemainingCapacity calls h.GetGpuInstanceRemainingCapacity.
func (s *Sim) DeviceGetGpuInstanceRemainingCapacity(h nvml.Device, arg *nvml.GpuInstanceProfileInfo) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstanceRemainingCapacity(arg)
}

// DeviceGetGpuInstances calls h.GetGpuInstances.
func (s *Sim) DeviceGetGpuInstances(h nvml.Device, arg *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetGpuInstances(arg)
}

// DeviceGetIndex calls h.GetIndex.
func (s *Sim) DeviceGetIndex(h nvml.Device) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetIndex()
}

// DeviceGetMaxMigDeviceCount calls h.GetMaxMigDeviceCount.
func (s *Sim) DeviceGetMaxMigDeviceCount(h nvml.Device) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetMaxMigDeviceCount()
}

// DeviceGetMemoryInfo calls h.GetMemoryInfo.
func (s *Sim) DeviceGetMemoryInfo(h nvml.Device) (nvml.Memory, nvml.Return) {
	if h == nil {
		return nvml.Memory{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetMemoryInfo()
}

// DeviceGetMigDeviceHandleByIndex calls h.GetMigDeviceHandleByIndex.
func (s *Sim) DeviceGetMigDeviceHandleByIndex(h nvml.Device, arg int) (nvml.Device, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetMigDeviceHandleByIndex(arg)
}

// DeviceGetMigMode calls h.GetMigMode.
func (s *Sim) DeviceGetMigMode(h nvml.Device) (int, int, nvml.Return) {
	if h == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetMigMode()
}

// DeviceGetMinorNumber calls h.GetMinorNumber.
func (s *Sim) DeviceGetMinorNumber(h nvml.Device) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetMinorNumber()
}

// DeviceGetName calls h.GetName.
func (s *Sim) DeviceGetName(h nvml.Device) (string, nvml.Return) {
	if h == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetName()
}

// DeviceGetPciInfo calls h.GetPciInfo.
func (s *Sim) DeviceGetPciInfo(h nvml.Device) (nvml.PciInfo, nvml.Return) {
	if h == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetPciInfo()
}

// DeviceGetUUID calls h.GetUUID.
func (s *Sim) DeviceGetUUID(h nvml.Device) (string, nvml.Return) {
	if h == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetUUID()
}

// DeviceIsMigDeviceHandle calls h.IsMigDeviceHandle.
func (s *Sim) DeviceIsMigDeviceHandle(h nvml.Device) (bool, nvml.Return) {
	if h == nil {
		return false, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.IsMigDeviceHandle()
}

// DeviceSetMigMode calls h.SetMigMode.
func (s *Sim) DeviceSetMigMode(h nvml.Device, arg int) (nvml.Return, nvml.Return) {
	if h == nil {
		return nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.SetMigMode(arg)
}

// GpuInstanceCreateComputeInstance calls h.CreateComputeInstance.
func (s *Sim) GpuInstanceCreateComputeInstance(h nvml.GpuInstance, arg *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.CreateComputeInstance(arg)
}

// GpuInstanceDestroy calls h.Destroy.
func (s *Sim) GpuInstanceDestroy(h nvml.GpuInstance) nvml.Return {
	if h == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return h.Destroy()
}

// GpuInstanceGetComputeInstanceById calls h.GetComputeInstanceById.
func (s *Sim) GpuInstanceGetComputeInstanceById(h nvml.GpuInstance, arg int) (nvml.ComputeInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeInstanceById(arg)
}

// GpuInstanceGetComputeInstanceProfileInfo calls h.GetComputeInstanceProfileInfo.
func (s *Sim) GpuInstanceGetComputeInstanceProfileInfo(h nvml.GpuInstance, arg int, arg2 int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	if h == nil {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeInstanceProfileInfo(arg, arg2)
}

// GpuInstanceGetComputeInstanceRemainingCapacity calls h.GetComputeInstanceRemainingCapacity.
func (s *Sim) GpuInstanceGetComputeInstanceRemainingCapacity(h nvml.GpuInstance, arg *nvml.ComputeInstanceProfileInfo) (int, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeInstanceRemainingCapacity(arg)
}

// GpuInstanceGetComputeInstances calls h.GetComputeInstances.
func (s *Sim) GpuInstanceGetComputeInstances(h nvml.GpuInstance, arg *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	if h == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetComputeInstances(arg)
}

// GpuInstanceGetInfo calls h.GetInfo.
func (s *Sim) GpuInstanceGetInfo(h nvml.GpuInstance) (nvml.GpuInstanceInfo, nvml.Return) {
	if h == nil {
		return nvml.GpuInstanceInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetInfo()
}
