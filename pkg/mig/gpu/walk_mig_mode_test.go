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

// TestMIGDevicesOfAGPUWithoutMIG: a GPU that answers NOT_SUPPORTED for its
// MIG mode has no MIG devices and no processes on them, and a destroy of a
// device on it finds none (ErrNotFound, which a caller takes for done),
// rather than failing.
func TestMIGDevicesOfAGPUWithoutMIG(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	noMIG := func() {
		t.Helper()
		if err := sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_NOT_SUPPORTED}); err != nil {
			t.Fatal(err)
		}
	}
	noMIG()
	if devs, err := m.MIGDevices(ctx, 0); err != nil || len(devs) != 0 {
		t.Errorf("MIGDevices of a GPU without MIG = %+v, %v; want none, no error", devs, err)
	}
	noMIG()
	if procs, err := m.MIGProcesses(ctx, 0); err != nil || len(procs) != 0 {
		t.Errorf("MIGProcesses of a GPU without MIG = %v, %v; want none, no error", procs, err)
	}
	noMIG()
	if err := m.DestroyMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb", Start: 0}); !errors.Is(err, gpu.ErrNotFound) {
		t.Errorf("DestroyMIGDevice on a GPU without MIG = %v; want an error wrapping ErrNotFound", err)
	}
}

// TestMIGDevicesWhileMIGModeOffIsPending: a GPU whose MIG mode is still on
// with a change to off pending (an A100 held by another NVML client when
// MIG mode was disabled) is read by its current mode: the GPU instances
// made meanwhile are listed, not hidden as those of a GPU in MIG-off mode.
func TestMIGDevicesWhileMIGModeOffIsPending(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if mode, err := m.SetMIGMode(ctx, 0, true); err != nil || !mode.Current {
		t.Fatalf("SetMIGMode on the idle A100 = %+v, %v; want MIG mode on", mode, err)
	}
	if _, err := sim.OpenClient(sim.Snapshot().GPUs[0].UUID); err != nil {
		t.Fatal(err)
	}
	if mode, err := m.SetMIGMode(ctx, 0, false); err != nil || !mode.Current || mode.Pending {
		t.Fatalf("SetMIGMode off on the held A100 = %+v, %v; want the change pending (the test does not bite)", mode, err)
	}
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	md, err := m.CreateMIGDevice(ctx, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0] != md {
		t.Errorf("MIGDevices with MIG mode off pending = %+v; want [%+v]", devs, md)
	}
}
