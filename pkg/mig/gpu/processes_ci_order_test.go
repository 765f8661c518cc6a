package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestProcessesOfAGIWithSeveralCIsInCIOrder: the processes of a GPU
// instance split into several compute instances (made with nvidia-smi)
// are listed compute instance by compute instance in CI ID order, by
// Processes and MIGProcesses alike, whatever order they started in.
func TestProcessesOfAGIWithSeveralCIsInCIOrder(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	// Another NVML client makes a 3g.40gb GI at 4 with two 1-slice CIs.
	dev, ret := sim.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex: %v", ret)
	}
	giProf, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetGpuInstanceProfileInfo: %v", ret)
	}
	gi, ret := dev.CreateGpuInstanceWithPlacement(&giProf, &nvml.GpuInstancePlacement{Start: 4, Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatalf("CreateGpuInstanceWithPlacement: %v", ret)
	}
	ciProf, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetComputeInstanceProfileInfo: %v", ret)
	}
	for range 2 {
		if _, ret := gi.CreateComputeInstance(&ciProf); ret != nvml.SUCCESS {
			t.Fatalf("CreateComputeInstance: %v", ret)
		}
	}
	gis := sim.Snapshot().GPUs[0].GPUInstances
	if len(gis) != 1 || len(gis[0].ComputeInstances) != 2 {
		t.Fatalf("simulator holds %+v; want one GPU instance with two compute instances", gis)
	}
	cis := gis[0].ComputeInstances
	// The later CI's process first.
	var want []gpu.Process
	for _, ci := range []nvmlsim.ComputeInstance{cis[1], cis[0]} {
		pid, err := sim.StartProcess(ci.UUID, 256)
		if err != nil {
			t.Fatal(err)
		}
		want = append([]gpu.Process{{PID: pid, UsedMemoryMiB: 256}}, want...)
	}
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	got, err := m.Processes(ctx, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Processes(%s) not in CI ID order (-want +got):\n%s", d, diff)
	}
	all, err := m.MIGProcesses(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[mig.Device][]gpu.Process{d: want}, all); diff != "" {
		t.Errorf("MIGProcesses not in CI ID order (-want +got):\n%s", diff)
	}
}
