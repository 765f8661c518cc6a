package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestReadsAgainAfterAStaleMIGDeviceHandle: a MIG device handle NVML
// answers NOT_FOUND for while the GPU's MIG devices are read (it went
// stale: someone changed the GPU) makes MIGDevices and MIGProcesses read
// the GPU again rather than fail as if what was asked for were gone.
func TestReadsAgainAfterAStaleMIGDeviceHandle(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	sim, m, md := h100With(t, d)
	pid, err := sim.StartProcess(md.UUID, 512)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceId", Nth: 1, Return: nvml.ERROR_NOT_FOUND}); err != nil {
		t.Fatal(err)
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatalf("MIGDevices with a MIG device handle gone stale once = %v; want the GPU read again", err)
	}
	if diff := cmp.Diff([]gpu.MIGDevice{md}, devs); diff != "" {
		t.Errorf("MIGDevices (-want +got):\n%s", diff)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceId", Nth: 1, Return: nvml.ERROR_NOT_FOUND}); err != nil {
		t.Fatal(err)
	}
	procs, err := m.MIGProcesses(ctx, 0)
	if err != nil {
		t.Fatalf("MIGProcesses with a MIG device handle gone stale once = %v; want the GPU read again", err)
	}
	want := map[mig.Device][]gpu.Process{d: {{PID: pid, UsedMemoryMiB: 512}}}
	if diff := cmp.Diff(want, procs); diff != "" {
		t.Errorf("MIGProcesses (-want +got):\n%s", diff)
	}
}
