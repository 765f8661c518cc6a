package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestCreateRollsBackWhenTheFullCIProfileCannotBeRead: a GPU instance made
// whose full-size compute-instance profile NVML then fails to read is
// destroyed again, so that no GPU instance without a compute instance is
// left holding the GPU's slices.
func TestCreateRollsBackWhenTheFullCIProfileCannotBeRead(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	enableMIG(t, ctx, sim, m, 0)
	d := mig.Device{Profile: "2g.20gb", Start: 2}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.GetComputeInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	_, err := m.CreateMIGDevice(ctx, 0, d)
	if err == nil {
		t.Fatal("CreateMIGDevice succeeded despite the CI profile read failing; want an error")
	}
	if !errors.Is(err, gpu.ErrNVML) {
		t.Errorf("error %v does not wrap ErrNVML", err)
	}
	if code, ok := gpu.ReturnCode(err); !ok || code != nvml.ERROR_UNKNOWN {
		t.Errorf("ReturnCode = %v, %v; want %v, true", code, ok, nvml.ERROR_UNKNOWN)
	}
	for _, s := range []string{"getting full-size CI profile", "the GPU instance was destroyed again"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if got := simLayout(sim, 0).String(); got != "" {
		t.Errorf("simulator layout after the failed create = %q, want none (the GPU instance destroyed again)", got)
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 0 {
		t.Errorf("MIGDevices after the failed create = %+v, want none", devs)
	}
}
