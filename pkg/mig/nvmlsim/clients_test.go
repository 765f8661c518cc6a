package nvmlsim

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// TestClientOfMIGDeviceRefusesDestroys: a client holding a MIG device (a
// monitoring agent's handle) is no process: nvmlDeviceGetComputeRunningProcesses
// lists nothing, yet NVML refuses to destroy its compute instance and GPU
// instance, and the GPU's reset, until it lets go.
func TestClientOfMIGDeviceRefusesDestroys(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	gi, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	id, err := s.OpenClient(migUUIDOf(t, s, 0, ci))
	if err != nil {
		t.Fatal(err)
	}
	mdev, ret := d.GetMigDeviceHandleByIndex(0)
	must(t, "GetMigDeviceHandleByIndex", ret)
	procs, ret := mdev.GetComputeRunningProcesses()
	must(t, "GetComputeRunningProcesses", ret)
	if len(procs) != 0 {
		t.Errorf("processes listed on the held MIG device: %+v, want none (a client is no compute process)", procs)
	}
	wantRet(t, "ComputeInstance.Destroy of a held MIG device", ci.Destroy(), nvml.ERROR_IN_USE)
	wantRet(t, "GpuInstance.Destroy of a held MIG device", gi.Destroy(), nvml.ERROR_IN_USE)
	if err := s.ResetGPU(0); !errors.Is(err, nvml.ERROR_IN_USE) {
		t.Errorf("ResetGPU with a client: %v, want ERROR_IN_USE", err)
	}
	if got := layout(s, 0); got != "3g.40gb@4" {
		t.Errorf("layout %q after refused destroys, want 3g.40gb@4", got)
	}
	if err := s.CloseClient(id); err != nil {
		t.Fatal(err)
	}
	must(t, "ComputeInstance.Destroy once the client let go", ci.Destroy())
	must(t, "GpuInstance.Destroy once the client let go", gi.Destroy())
	if err := s.CloseClient(id); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("CloseClient twice: %v, want ERROR_NOT_FOUND", err)
	}
}

// TestClientOfGPUInstanceRefusesItsDestroyOnly: a client holding a GPU
// instance alone lets its compute instance go, not the GPU instance: the
// GPU instance is left without a compute instance, as NVML leaves it.
func TestClientOfGPUInstanceRefusesItsDestroyOnly(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	gi, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	other, otherCI := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	info, ret := gi.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	id, err := s.OpenGPUInstanceClient(0, int(info.Id))
	if err != nil {
		t.Fatal(err)
	}
	must(t, "ComputeInstance.Destroy in a held GPU instance", ci.Destroy())
	wantRet(t, "GpuInstance.Destroy of a held GPU instance", gi.Destroy(), nvml.ERROR_IN_USE)
	must(t, "ComputeInstance.Destroy in another GPU instance", otherCI.Destroy())
	must(t, "GpuInstance.Destroy of another GPU instance", other.Destroy())
	if err := s.CloseClient(id); err != nil {
		t.Fatal(err)
	}
	must(t, "GpuInstance.Destroy once the client let go", gi.Destroy())
}

// TestClientOfGPUHoldsMIGMode: a client of the whole GPU (nvidia_drm,
// nvidia-persistenced) holds a MIG mode change as a process does: pending on
// Ampere until a reset, which it refuses; refused on Hopper.
func TestClientOfGPUHoldsMIGMode(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100 + ",1xH100-SXM5-80GB"})
	snap := s.Snapshot()
	var ids []uint64
	for _, g := range snap.GPUs {
		id, err := s.OpenClient(g.UUID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	a, h := handle(t, s, 0), handle(t, s, 1)
	if diff := cmp.Diff(modeStep{nvml.ERROR_IN_USE, nvml.SUCCESS, 0, 1}, setMode(t, a, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("A100 SetMigMode(ENABLE) with a client (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(modeStep{nvml.ERROR_IN_USE, nvml.SUCCESS, 0, 0}, setMode(t, h, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("H100 SetMigMode(ENABLE) with a client (-want +got):\n%s", diff)
	}
	if err := s.ResetGPU(0); !errors.Is(err, nvml.ERROR_IN_USE) {
		t.Errorf("ResetGPU with a client: %v, want ERROR_IN_USE", err)
	}
	for _, id := range ids {
		if err := s.CloseClient(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatalf("ResetGPU once the client let go: %v", err)
	}
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 1, 1}, setMode(t, h, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("H100 SetMigMode(ENABLE) once the client let go (-want +got):\n%s", diff)
	}
	if cur, pend, _ := a.GetMigMode(); cur != 1 || pend != 1 {
		t.Errorf("A100 mode %d/%d after the reset, want 1/1", cur, pend)
	}
}

// TestClientsSharedAndChecked: clients live in the state file (opened by
// one simulator, they hold another's calls); unknown targets are refused.
func TestClientsSharedAndChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	spec := "1x" + a100
	tests := newTestSim(t, Config{Spec: spec, StatePath: path})
	agent := newTestSim(t, Config{Spec: spec, StatePath: path})
	d := migOn(t, agent, 0)
	gi := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	info, ret := gi.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	id, err := tests.OpenGPUInstanceClient(0, int(info.Id))
	if err != nil {
		t.Fatal(err)
	}
	wantRet(t, "GpuInstance.Destroy of a GI another simulator's client holds", gi.Destroy(), nvml.ERROR_IN_USE)
	if diff := cmp.Diff([]Client{{ID: id, GPUIndex: 0, GIID: int(info.Id), CIID: -1}}, agent.Snapshot().Clients); diff != "" {
		t.Errorf("clients (-want +got):\n%s", diff)
	}
	if _, err := tests.OpenClient("MIG-00000000-0000-0000-0000-000000000000"); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("OpenClient of an unknown UUID: %v, want ERROR_NOT_FOUND", err)
	}
	if _, err := tests.OpenGPUInstanceClient(0, int(info.Id)+1); !errors.Is(err, nvml.ERROR_NOT_FOUND) {
		t.Errorf("OpenGPUInstanceClient of an unknown GPU instance: %v, want ERROR_NOT_FOUND", err)
	}
	if _, err := tests.OpenGPUInstanceClient(3, 0); !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
		t.Errorf("OpenGPUInstanceClient of GPU 3: %v, want ERROR_INVALID_ARGUMENT", err)
	}
}
