package gpu_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestProfileOfferedAtTwoIndices: a catalog profile NVML offers at a
// second index (past go-nvml's GPU_INSTANCE_PROFILE_COUNT) is neither a
// profile the catalog lacks nor a second set of GPU instances: its GPU
// instances are listed once and the table has no mismatch.
func TestProfileOfferedAtTwoIndices(t *testing.T) {
	ctx := t.Context()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	m := managerOver(t, newerDriver{Interface: sim, gi: move{from: nvml.GPU_INSTANCE_PROFILE_1_SLICE, to: nvml.GPU_INSTANCE_PROFILE_COUNT, also: true}}, nil, "")
	enableMIG(t, ctx, sim, m, 0)
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb", Start: 6}); err != nil {
		t.Fatal(err)
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 {
		t.Errorf("MIGDevices = %+v, want the one 1g.10gb", devs)
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus[0].CatalogMismatches) != 0 {
		t.Errorf("mismatches %q, want none", gpus[0].CatalogMismatches)
	}
}

// TestListsACIWhenThePlainFullCIProfileIsNotOffered: a GPU instance whose
// <N>_SLICE compute-instance profile NVML does not offer, but whose
// 1_SLICE_REV1 profile (all of an H100 1g.20gb's multiprocessors) it does,
// is listed with its compute instance of that profile.
func TestListsACIWhenThePlainFullCIProfileIsNotOffered(t *testing.T) {
	ctx := t.Context()
	sim, _, _ := h100With(t, mig.Device{Profile: "1g.20gb", Start: 0})
	m := managerOver(t, newerDriver{Interface: sim, ci: move{from: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, to: nvml.COMPUTE_INSTANCE_PROFILE_COUNT}}, nil, "")
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].CIID < 0 || devs[0].UUID == "" {
		t.Errorf("MIG devices %+v, want the 1g.20gb with its compute instance and UUID", devs)
	}
}

// TestListsACIWhenTheREV1ProfileIsRefused: a 1-slice GPU instance whose
// 1_SLICE_REV1 compute-instance profile NVML answers INVALID_ARGUMENT for
// (a driver without it) is listed with its 1_SLICE compute instance. The
// faults answer the REV1 reads of the first three listings (each listing
// asks for the 1_SLICE profile, then for 1_SLICE_REV1), however many the
// manager makes.
func TestListsACIWhenTheREV1ProfileIsRefused(t *testing.T) {
	ctx := t.Context()
	sim, m, _ := h100With(t, mig.Device{Profile: "1g.10gb", Start: 0})
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

// TestDestroyWithMIGModeOff: destroying a MIG device of a GPU whose MIG
// mode is off finds nothing, and says why.
func TestDestroyWithMIGModeOff(t *testing.T) {
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	err := m.DestroyMIGDevice(t.Context(), 0, mig.Device{Profile: "1g.10gb", Start: 0})
	if !errors.Is(err, gpu.ErrNotFound) || !strings.Contains(err.Error(), "MIG mode is off") {
		t.Errorf("DestroyMIGDevice = %v, want ErrNotFound saying MIG mode is off", err)
	}
}

// TestMIGDeviceIndexAnsweredInvalidArgument: a MIG device index NVML
// answers ERROR_INVALID_ARGUMENT for holds no MIG device; the listing goes
// on.
func TestMIGDeviceIndexAnsweredInvalidArgument(t *testing.T) {
	ctx := t.Context()
	sim, m, _ := h100With(t, mig.Device{Profile: "3g.40gb", Start: 4})
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetMigDeviceHandleByIndex", Nth: 1, Return: nvml.ERROR_INVALID_ARGUMENT}); err != nil {
		t.Fatal(err)
	}
	if devs, err := m.MIGDevices(ctx, 0); err != nil || len(devs) != 1 {
		t.Errorf("MIGDevices = %+v, %v; want the 3g.40gb", devs, err)
	}
}

// TestCreateWhenTheCIIsReportedButMissing: a compute instance NVML reports
// created but the GPU instance lacks is a failure, and the GPU instance is
// destroyed again: no device without a compute instance is handed out.
func TestCreateWhenTheCIIsReportedButMissing(t *testing.T) {
	ctx := t.Context()
	sim, m, _ := h100With(t)
	if err := sim.InjectFault(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	d, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 4})
	if !errors.Is(err, gpu.ErrNVML) || !strings.Contains(err.Error(), "no compute instance") {
		t.Errorf("CreateMIGDevice = %+v, %v; want ErrNVML for the missing compute instance", d, err)
	}
	if got := simLayout(sim, 0); len(got) != 0 {
		t.Errorf("simulator layout %s, want the GPU instance destroyed again", got)
	}
}

// TestCreateRefusesAnotherGIProfileID: a profile NVML gives another GI
// profile ID than the catalog is not created (the catalog's description of
// it is not NVML's).
func TestCreateRefusesAnotherGIProfileID(t *testing.T) {
	ctx := t.Context()
	three := profileOf(t, mig.DefaultCatalog(), "3g.40gb")
	three.ID = 30
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", three)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware, Seed: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	m := managerOver(t, sim, nil, "")
	enableMIG(t, ctx, sim, m, 0)
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 4}); !errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("CreateMIGDevice = %v, want ErrNotSupported", err)
	}
	if got := simLayout(sim, 0); len(got) != 0 {
		t.Errorf("simulator layout %s, want nothing created", got)
	}
}

// TestDestroyRefusedForOneProcess: one process on the device refuses its
// destroy before anything is destroyed, naming the process.
func TestDestroyRefusedForOneProcess(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	sim, m, md := h100With(t, d)
	pid, err := sim.StartProcess(md.UUID, 512)
	if err != nil {
		t.Fatal(err)
	}
	err = m.DestroyMIGDevice(ctx, 0, d)
	if !errors.Is(err, gpu.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("1 process(es) running on GI %d (PIDs %d)", md.GIID, pid)) {
		t.Errorf("DestroyMIGDevice = %v, want ErrInUse naming the one process running", err)
	}
}

// TestDestroyFailsWhenTheFullCIProfileIsRefused: INVALID_ARGUMENT for the
// device's full-size compute-instance profile (an index go-nvml knows) is
// a failure, not the end of the driver's profiles: nothing is destroyed.
func TestDestroyFailsWhenTheFullCIProfileIsRefused(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	sim, m, _ := h100With(t, d)
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.GetComputeInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_INVALID_ARGUMENT}); err != nil {
		t.Fatal(err)
	}
	if err := m.DestroyMIGDevice(ctx, 0, d); err == nil || !strings.Contains(err.Error(), "getting full-size CI profile") {
		t.Errorf("DestroyMIGDevice = %v, want the full-size CI profile's failure", err)
	}
	if got := simLayout(sim, 0).String(); got != "3g.40gb@4" {
		t.Errorf("simulator layout %q, want 3g.40gb@4 untouched", got)
	}
}

// TestDestroyWhenTheFullCIProfileIsOfferedElsewhere: a device whose
// full-size compute-instance profile NVML offers at another index (a newer
// driver's numbering) is destroyed, its compute instance found there.
func TestDestroyWhenTheFullCIProfileIsOfferedElsewhere(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "1g.10gb", Start: 0}
	sim, _, _ := h100With(t, d)
	m := managerOver(t, newerDriver{Interface: sim, ci: move{from: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, to: nvml.COMPUTE_INSTANCE_PROFILE_COUNT}}, nil, "")
	if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
		t.Errorf("DestroyMIGDevice: %v", err)
	}
	if got := simLayout(sim, 0); len(got) != 0 {
		t.Errorf("simulator layout %s, want the device destroyed", got)
	}
}

// TestDestroyReadsAgainAfterNotFound: a MIG device handle that goes stale
// while the GPU instance's processes are listed, or compute instances NVML
// answers NOT_FOUND for while they are listed, make the destroy read the
// GPU again, not take the device for gone.
func TestDestroyReadsAgainAfterNotFound(t *testing.T) {
	for name, op := range map[string]string{
		"a stale MIG device handle": "GetGpuInstanceId",
		"stale compute instances":   "GpuInstance.GetComputeInstances",
	} {
		t.Run(name, func(t *testing.T) {
			d := mig.Device{Profile: "3g.40gb", Start: 4}
			sim, m, _ := h100With(t, d)
			if err := sim.InjectFault(nvmlsim.Fault{Op: op, Nth: 1, Return: nvml.ERROR_NOT_FOUND}); err != nil {
				t.Fatal(err)
			}
			if err := m.DestroyMIGDevice(t.Context(), 0, d); err != nil {
				t.Errorf("DestroyMIGDevice: %v", err)
			}
			if got := simLayout(sim, 0); len(got) != 0 {
				t.Errorf("simulator layout %s, want the device destroyed", got)
			}
		})
	}
}

// TestMIGDevicesOfAGPUWithoutGIs: a GPU in MIG mode without a GPU instance
// has no MIG devices and no processes on them, whatever NVML would answer
// for MIG device handles.
func TestMIGDevicesOfAGPUWithoutGIs(t *testing.T) {
	ctx := t.Context()
	sim, m, _ := h100With(t)
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetMaxMigDeviceCount", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if devs, err := m.MIGDevices(ctx, 0); err != nil || len(devs) != 0 {
		t.Errorf("MIGDevices = %+v, %v; want none", devs, err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetMaxMigDeviceCount", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if procs, err := m.MIGProcesses(ctx, 0); err != nil || len(procs) != 0 {
		t.Errorf("MIGProcesses = %v, %v; want none", procs, err)
	}
}

// h100With is a simulated H100 in MIG mode with devices made, and the
// MIG device of the last of them (zero without devices).
func h100With(t *testing.T, devices ...mig.Device) (*nvmlsim.Sim, *gpu.NVMLManager, gpu.MIGDevice) {
	t.Helper()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if _, err := m.SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	var md gpu.MIGDevice
	for _, d := range devices {
		var err error
		if md, err = m.CreateMIGDevice(t.Context(), 0, d); err != nil {
			t.Fatal(err)
		}
	}
	return sim, m, md
}
