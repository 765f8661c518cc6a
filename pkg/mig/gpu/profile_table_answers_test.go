package gpu_test

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestGPUWithoutMIG: a GPU that answers NOT_SUPPORTED for its MIG mode is
// listed as not MIG-capable, not as a failure.
func TestGPUWithoutMIG(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_NOT_SUPPORTED}); err != nil {
		t.Fatal(err)
	}
	gpus, err := m.GPUs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 1 || gpus[0].MIGCapable || gpus[0].MIGMode.Current || gpus[0].MIGMode.Pending {
		t.Errorf("GPUs() = %+v, want one GPU, not MIG-capable", gpus)
	}
}

// TestProfileTableAfterMIGModeChangedByAnotherClient: MIG mode turned off
// and on again by another NVML client (nvidia-smi), not SetMIGMode: once a
// listing has seen it off, the table is read again when MIG mode is on.
func TestProfileTableAfterMIGModeChangedByAnotherClient(t *testing.T) {
	sim, shifted, m := shiftedH100(t)
	other := func(mode int) {
		t.Helper()
		h, ret := sim.DeviceGetHandleByIndex(0)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if _, ret := h.SetMigMode(mode); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	memory := func(step string, want map[string]int64) {
		t.Helper()
		gpus, err := m.GPUs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, v := range gpus[0].ProfileValues {
			got[v.Profile] = v.MemoryMiB
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}
	p, err := model(t, "H100-SXM5-80GB").Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	shiftedMiB := map[string]int64{"3g.40gb": p.NVMLValues().MemoryMiB + 512}

	other(nvml.DEVICE_MIG_ENABLE)
	shifted.Store(true)
	memory("MIG on", shiftedMiB)
	other(nvml.DEVICE_MIG_DISABLE)
	memory("MIG off: the last mode's table", shiftedMiB)
	shifted.Store(false)
	other(nvml.DEVICE_MIG_ENABLE)
	memory("MIG on again", map[string]int64{})
}

// TestProfileNVMLAnswersInvalidArgument: a catalog profile NVML answers
// ERROR_INVALID_ARGUMENT for (a driver older than the profile) is not
// offered, as one answered NOT_SUPPORTED: a mismatch, the rest of the table
// read.
func TestProfileNVMLAnswersInvalidArgument(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
	enableMIG(t, ctx, sim, m, 0)
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_INVALID_ARGUMENT}); err != nil {
		t.Fatal(err)
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var notOffered []string
	for _, s := range gpus[0].CatalogMismatches {
		if strings.Contains(s, "NVML does not offer it on this GPU (ERROR_INVALID_ARGUMENT)") {
			notOffered = append(notOffered, s)
		}
	}
	if len(notOffered) != 1 {
		t.Errorf("mismatches %q, want one profile NVML does not offer", gpus[0].CatalogMismatches)
	}
}

// TestProfileTableReadOncePerMIGMode: after MIG mode is turned off and on
// again, the table is read on the next listing and then kept while MIG
// mode stays on.
func TestProfileTableReadOncePerMIGMode(t *testing.T) {
	_, shifted, m := shiftedH100(t)
	ctx := t.Context()
	list := func() {
		t.Helper()
		if _, err := m.GPUs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, on := range []bool{true, false, true} {
		if _, err := m.SetMIGMode(ctx, 0, on); err != nil {
			t.Fatal(err)
		}
		list()
	}
	shifted.Store(true)
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus[0].ProfileValues) != 0 {
		t.Errorf("the table was read again in the same MIG mode: %v", gpus[0].ProfileValues)
	}
}

// TestProfileTableWithoutPlacements: a profile whose possible placements
// NVML does not list (NOT_SUPPORTED) still has its values in the table;
// the catalog's placements stand for it.
func TestProfileTableWithoutPlacements(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Catalog: driverCatalog(t)})
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstancePossiblePlacements", Nth: 1, Return: nvml.ERROR_NOT_SUPPORTED}); err != nil {
		t.Fatal(err)
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []mig.NVMLProfileValues{{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEG: 3}}
	if diff := cmp.Diff(want, gpus[0].ProfileValues); diff != "" {
		t.Errorf("profile values (-want +got):\n%s", diff)
	}
	if len(gpus[0].NVMLPlacements) != 0 {
		t.Errorf("NVML placements %v, want the catalog's", gpus[0].NVMLPlacements)
	}
}
