package gpu_test

import (
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

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
// stays on; with MIG off the last mode's table stands; it is read again
// once MIG mode is on again, whether a read saw it off or SetMIGMode turned
// it off and on between reads; a re-read that fails keeps the last table
// and is tried again on the next read.
func TestProfileTablePerMIGMode(t *testing.T) {
	sim, shifted, m := shiftedH100(t)
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
	p, err := model(t, "H100-SXM5-80GB").Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	catalog := map[string]int64{}
	shiftedMiB := map[string]int64{"3g.40gb": p.NVMLValues().MemoryMiB + 512}
	check := func(step string, want map[string]int64) {
		t.Helper()
		if diff := cmp.Diff(want, memory()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}

	shifted.Store(true)
	setMode(true)
	check("first MIG mode", shiftedMiB)
	shifted.Store(false)
	check("same MIG mode: read once", shiftedMiB)
	setMode(false)
	check("MIG off: the last mode's table", shiftedMiB)
	setMode(true)
	check("MIG on again, after a read saw it off", catalog)

	shifted.Store(true)
	setMode(false)
	setMode(true)
	check("MIG off and on between reads", shiftedMiB)

	shifted.Store(false)
	setMode(false)
	setMode(true)
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	check("a failed re-read: the last table", shiftedMiB)
	check("read again on the next call", catalog)
}

// shiftedH100 is a simulated H100 whose profile table NVML answers with
// 3g.40gb with 512 MiB more memory while shifted holds, and its manager.
func shiftedH100(t *testing.T) (*nvmlsim.Sim, *atomic.Bool, *gpu.NVMLManager) {
	t.Helper()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	shifted := &atomic.Bool{}
	m := managerOver(t, shiftedTable{Interface: sim, set: shifted, extraMiB: 512}, nil, "")
	return sim, shifted, m
}
