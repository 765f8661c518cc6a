package gpu_test

import (
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
)

// renamedDriver is a simulated NVML whose GPUs give the product name name
// while set holds: the same GPU (UUID) taken for another catalog model.
type renamedDriver struct {
	nvml.Interface
	set  *atomic.Bool
	name string
}

func (l renamedDriver) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return renamedDevice{Device: d, l: l}, ret
}

type renamedDevice struct {
	nvml.Device
	l renamedDriver
}

func (d renamedDevice) GetName() (string, nvml.Return) {
	if d.l.set.Load() {
		return d.l.name, nvml.SUCCESS
	}
	return d.Device.GetName()
}

// TestProfileTableIsPerModel: a profile table read for one catalog model
// is not reported for a GPU taken for another model under the same UUID
// (the table holds only the differences from the model it was read for),
// whether MIG mode is on or off.
func TestProfileTableIsPerModel(t *testing.T) {
	for _, migOn := range []bool{true, false} {
		sim := rightHalfSim(t)
		renamed := &atomic.Bool{}
		lib := renamedDriver{Interface: gputest.OnlyInMIGMode(sim), set: renamed, name: "NVIDIA A100-SXM4-40GB"}
		m := managerOver(t, lib, nil, "")
		if _, err := m.SetMIGMode(t.Context(), 0, true); err != nil {
			t.Fatal(err)
		}
		if got := nvmlPlacements(t, m); len(got) == 0 {
			t.Fatalf("the A100-SXM4-80GB's table has no 3g.40gb placements: the test does not bite")
		}
		if !migOn {
			if _, err := m.SetMIGMode(t.Context(), 0, false); err != nil {
				t.Fatal(err)
			}
		}
		renamed.Store(true)
		if got := nvmlPlacements(t, m); got != nil {
			t.Errorf("MIG on %t: the GPU taken for an A100-SXM4-40GB reports the 80GB model's 3g.40gb placements %v", migOn, got)
		}
	}
}
