package gpu_test

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// devicesWrapped is an NVML (a simulated one) whose GPU handles, as
// DeviceGetHandleByIndex gives them, are wrapped by wrap: a GPU answering
// some calls as a driver the simulator does not play would.
type devicesWrapped struct {
	nvml.Interface
	wrap func(nvml.Device) nvml.Device
}

func (l devicesWrapped) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return l.wrap(d), ret
}
