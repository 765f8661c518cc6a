package gpu_test

import (
	"errors"
	"fmt"
	"strings"
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

// TestSetMIGModeHeldSaysByWhom: a Hopper GPU refuses a MIG mode change
// while it is in use, leaving nothing pending (activation status
// ERROR_IN_USE). The error wraps ErrInUse and says what holds the GPU: the
// processes NVML lists on it by PID, or, with none listed, another NVML
// client (a monitoring agent), which no process list shows.
func TestSetMIGModeHeldSaysByWhom(t *testing.T) {
	for name, tc := range map[string]struct {
		hold func(sim *nvmlsim.Sim, uuid string) (string, error)
		want string
	}{
		"a client": {
			hold: func(sim *nvmlsim.Sim, uuid string) (string, error) {
				_, err := sim.OpenClient(uuid)
				return "", err
			},
			want: "no compute process is listed on the GPU, so another NVML client holds it",
		},
		"a process": {
			hold: func(sim *nvmlsim.Sim, uuid string) (string, error) {
				pid, err := sim.StartProcess(uuid, 1024)
				return fmt.Sprintf("1 process(es) run on the GPU (PIDs %d)", pid), err
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
			want, err := tc.hold(sim, sim.Snapshot().GPUs[0].UUID)
			if err != nil {
				t.Fatal(err)
			}
			if want == "" {
				want = tc.want
			}
			_, err = m.SetMIGMode(t.Context(), 0, true)
			if !errors.Is(err, gpu.ErrInUse) {
				t.Fatalf("SetMIGMode on a held H100 = %v; want an error wrapping ErrInUse", err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("SetMIGMode on a held H100 = %q; want it to say %q", err, want)
			}
			if g := sim.Snapshot().GPUs[0]; g.MIGCurrent || g.MIGPending {
				t.Errorf("MIG mode after the refused change: current %v, pending %v; want off, nothing pending", g.MIGCurrent, g.MIGPending)
			}
		})
	}
}
