package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestSetMIGModeRebootRequired: a GPU the driver cannot reset itself (one
// passed through to a virtual machine: activation status
// ERROR_RESET_REQUIRED) leaves an idle A100's mode change pending and says
// that only a reboot applies it.
func TestSetMIGModeRebootRequired(t *testing.T) {
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", NoGPUReset: true})
	got, err := m.SetMIGMode(t.Context(), 0, true)
	if err != nil {
		t.Fatalf("SetMIGMode on a GPU that needs a reboot: %v; want the mode left pending", err)
	}
	want := gpu.MIGMode{Current: false, Pending: true, RebootRequired: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SetMIGMode (-want +got):\n%s", diff)
	}
}

// resetAnsweredDevice is a GPU whose SetMigMode answers activation status
// ERROR_RESET_REQUIRED whatever it did.
type resetAnsweredDevice struct{ nvml.Device }

func (d resetAnsweredDevice) SetMigMode(mode int) (nvml.Return, nvml.Return) {
	_, ret := d.Device.SetMigMode(mode)
	return nvml.ERROR_RESET_REQUIRED, ret
}

// TestSetMIGModeAppliedIsNoRebootRequired: a mode change NVML applied (the
// current mode is the one asked for) needs no reboot, whatever activation
// status came with it.
func TestSetMIGModeAppliedIsNoRebootRequired(t *testing.T) {
	_, m := gputest.SimulatedOver(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB"}, func(l nvml.Interface) nvml.Interface {
		return devicesWrapped{l, func(d nvml.Device) nvml.Device { return resetAnsweredDevice{d} }}
	})
	got, err := m.SetMIGMode(t.Context(), 0, true)
	if err != nil {
		t.Fatalf("SetMIGMode: %v", err)
	}
	want := gpu.MIGMode{Current: true, Pending: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SetMIGMode of a change applied (-want +got):\n%s", diff)
	}
}

// TestSetMIGModeReportsWhatNVMLDid: where NVML answers success to the call
// and to its activation but the mode did not change (a driver that did
// nothing), SetMIGMode reports the mode NVML reports, without an error,
// for the caller to compare with the mode it asked for.
func TestSetMIGModeReportsWhatNVMLDid(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
	if err := sim.InjectFault(nvmlsim.Fault{Op: "SetMigMode", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	got, err := m.SetMIGMode(t.Context(), 0, true)
	if err != nil {
		t.Fatalf("SetMIGMode answered success by NVML = %v; want no error", err)
	}
	if diff := cmp.Diff(gpu.MIGMode{}, got); diff != "" {
		t.Errorf("SetMIGMode (-want +got):\n%s", diff)
	}
}
