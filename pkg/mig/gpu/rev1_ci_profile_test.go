package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestListsACIWhenTheREV1ProfileIsRefused: a 1-slice GPU instance whose
// 1_SLICE_REV1 compute-instance profile NVML answers INVALID_ARGUMENT for
// (a driver without it) is listed with its 1_SLICE compute instance. The
// faults answer the REV1 reads of the first three listings (each listing
// asks for the 1_SLICE profile, then for 1_SLICE_REV1), however many the
// manager makes.
func TestListsACIWhenTheREV1ProfileIsRefused(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	for _, nth := range []int{2, 4, 6} {
		if err := sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.GetComputeInstanceProfileInfo", Nth: nth, Return: nvml.ERROR_INVALID_ARGUMENT}); err != nil {
			t.Fatal(err)
		}
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil || len(devs) != 1 || devs[0].CIID < 0 || devs[0].UUID == "" {
		t.Errorf("MIGDevices = %+v, %v; want the 1g.10gb with its compute instance", devs, err)
	}
}
