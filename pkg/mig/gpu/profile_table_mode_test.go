package gpu_test

import (
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// shiftedTable is an NVML whose GPUs describe profile 3g.40gb with
// extraMiB more memory while set holds: the table another MIG mode might
// bring (nvml.h fixes it only for the lifetime of one MIG mode).
type shiftedTable struct {
	nvml.Interface
	set      *atomic.Bool
	extraMiB uint64
}

func (n shiftedTable) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := n.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return tableDevice{Device: d, t: n}, ret
}

type tableDevice struct {
	nvml.Device
	t shiftedTable
}

func (d tableDevice) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	info, ret := d.Device.GetGpuInstanceProfileInfo(profile)
	if ret == nvml.SUCCESS && profile == nvml.GPU_INSTANCE_PROFILE_3_SLICE && d.t.set.Load() {
		info.MemorySizeMB += d.t.extraMiB
	}
	return info, ret
}

// TestProfileTablePerMIGMode: the profile table is read once while MIG mode
// stays on, and again once MIG mode has been off and is on again.
func TestProfileTablePerMIGMode(t *testing.T) {
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	changed := &atomic.Bool{}
	m, err := gpu.NewNVML(shiftedTable{Interface: sim, set: changed, extraMiB: 512}, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	ctx := t.Context()
	memory := func() map[string]int64 {
		t.Helper()
		gpus, err := m.GPUs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, v := range gpus[0].ProfileValues {
			out[v.Profile] = v.MemoryMiB
		}
		return out
	}
	setMode := func(on bool) {
		t.Helper()
		if _, err := m.SetMIGMode(ctx, 0, on); err != nil {
			t.Fatal(err)
		}
	}
	h100, err := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := h100.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	changedMiB := p.NVMLValues().MemoryMiB + 512

	setMode(true)
	if diff := cmp.Diff(map[string]int64{}, memory()); diff != "" {
		t.Errorf("first MIG mode (-want +got):\n%s", diff)
	}
	changed.Store(true)
	if diff := cmp.Diff(map[string]int64{}, memory()); diff != "" {
		t.Errorf("same MIG mode, table read once (-want +got):\n%s", diff)
	}
	setMode(false)
	if diff := cmp.Diff(map[string]int64{}, memory()); diff != "" {
		t.Errorf("MIG off: the last table (-want +got):\n%s", diff)
	}
	setMode(true)
	if diff := cmp.Diff(map[string]int64{"3g.40gb": changedMiB}, memory()); diff != "" {
		t.Errorf("MIG on again: the table read again (-want +got):\n%s", diff)
	}
}
