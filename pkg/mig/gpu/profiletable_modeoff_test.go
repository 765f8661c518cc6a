package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// turnsMIGOff is the simulator where MIG mode of GPU 0 goes off (nvidia-smi
// -mig 0 on Hopper, a reset applying a pending disable) just after the
// first nvmlDeviceGetMigMode that answers it on, while *armed.
type turnsMIGOff struct {
	*nvmlsim.Sim
	armed *bool
}

func (l turnsMIGOff) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Sim.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return modeOffDevice{Device: d, armed: l.armed}, ret
}

type modeOffDevice struct {
	nvml.Device
	armed *bool
}

func (d modeOffDevice) GetMigMode() (int, int, nvml.Return) {
	cur, pending, ret := d.Device.GetMigMode()
	if ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE && *d.armed {
		*d.armed = false
		d.Device.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	}
	return cur, pending, ret
}

// TestProfileTableReadAsMIGModeGoesOffIsNotKept: where NVML answers
// NOT_SUPPORTED for every profile once MIG mode is off (nvml.h;
// gputest.OnlyInMIGMode), a table read just as it went off is not kept as
// the GPU's (it would say NVML offers no profile at all, and every layout
// would be refused without MIG mode being turned on again).
func TestProfileTableReadAsMIGModeGoesOffIsNotKept(t *testing.T) {
	ctx := t.Context()
	sim, plain := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if _, err := plain.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	armed := true
	m := managerOver(t, gputest.OnlyInMIGMode(turnsMIGOff{Sim: sim, armed: &armed}), nil, "")
	if _, err := m.GPUs(ctx); err != nil {
		t.Fatal(err)
	}
	if armed {
		t.Fatal("MIG mode was not turned off under the read: the test does not bite")
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[0]; g.MIGMode.Current || len(g.CatalogMismatches) > 0 || len(g.NVMLPlacements) > 0 {
		t.Errorf("MIG off after a table read as it went off: MIG %+v, mismatches %q, placements %v; want MIG off and no table (the catalog's)",
			g.MIGMode, g.CatalogMismatches, g.NVMLPlacements)
	}
}
