package gpu_test

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestDestroyOnAMissingGPUIsNotGone: destroying a device of a GPU index
// NVML does not have (nvmlDeviceGetHandleByIndex answers
// ERROR_INVALID_ARGUMENT) is an NVML error, not ErrNotFound: the agent
// takes ErrNotFound as the GPU instance destroyed already and would
// count the step done.
func TestDestroyOnAMissingGPUIsNotGone(t *testing.T) {
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "H100-SXM5-80GB"})
	err := m.DestroyMIGDevice(t.Context(), 3, mig.Device{Profile: "3g.40gb", Start: 4})
	if err == nil || errors.Is(err, gpu.ErrNotFound) || !errors.Is(err, gpu.ErrNVML) {
		t.Errorf("destroying on GPU 3 of 1: %v; want an NVML error that is not ErrNotFound", err)
	}
	if code, ok := gpu.ReturnCode(err); !ok || code != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("ReturnCode = %v, %t; want ERROR_INVALID_ARGUMENT", code, ok)
	}
}
