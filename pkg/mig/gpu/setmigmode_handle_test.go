package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// resettingNVML is NVML whose GPU handles stop answering once SetMigMode
// was called on them (the change unbound or reset the GPU, as nvml.h warns
// it may), while a handle got again answers; by UUID it answers
// ERROR_GPU_IS_LOST, as nvml.h says it does while any GPU is off the bus.
type resettingNVML struct {
	*nvmlsim.Sim
}

func (r resettingNVML) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := r.Sim.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return &resetHandle{Device: d}, ret
}

func (r resettingNVML) DeviceGetHandleByUUID(string) (nvml.Device, nvml.Return) {
	return nil, nvml.ERROR_GPU_IS_LOST
}

type resetHandle struct {
	nvml.Device
	reset bool
}

func (h *resetHandle) SetMigMode(mode int) (nvml.Return, nvml.Return) {
	h.reset = true
	return h.Device.SetMigMode(mode)
}

func (h *resetHandle) GetMigMode() (int, int, nvml.Return) {
	if h.reset {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.Device.GetMigMode()
}

// TestSetMIGModeReadsTheModeThroughANewHandle: the mode a change leaves is
// read through a handle got again, not the one the change may have made
// stale, and not by UUID, which fails while another GPU is off the bus.
func TestSetMIGModeReadsTheModeThroughANewHandle(t *testing.T) {
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	m := managerOver(t, resettingNVML{sim}, nil, "")
	got, err := m.SetMIGMode(t.Context(), 0, true)
	if err != nil {
		t.Fatalf("SetMIGMode: %v", err)
	}
	if !got.Current || !got.Pending {
		t.Errorf("mode %+v, want MIG mode on", got)
	}
}
