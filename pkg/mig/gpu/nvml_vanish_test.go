package gpu_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// ciVanishes is the simulated NVML with one twist: once armed, the first
// compute instance read (nvmlComputeInstanceGetInfo) finds its compute
// instance destroyed by someone else just after it was listed (an
// administrator's `nvidia-smi mig -dci`), so NVML answers
// INVALID_ARGUMENT for the handle, as for any stale handle. With meanwhile
// set, that read runs it instead of the destroy.
type ciVanishes struct {
	nvml.Interface
	armed     *bool
	meanwhile func()
}

func (l ciVanishes) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return vanishDevice{Device: d, armed: l.armed, meanwhile: l.meanwhile}, ret
}

type vanishDevice struct {
	nvml.Device
	armed     *bool
	meanwhile func()
}

func (d vanishDevice) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	gis, ret := d.Device.GetGpuInstances(info)
	for i := range gis {
		gis[i] = vanishGI{GpuInstance: gis[i], armed: d.armed, meanwhile: d.meanwhile}
	}
	return gis, ret
}

type vanishGI struct {
	nvml.GpuInstance
	armed     *bool
	meanwhile func()
}

func (g vanishGI) GetComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	cis, ret := g.GpuInstance.GetComputeInstances(info)
	for i := range cis {
		cis[i] = vanishCI{ComputeInstance: cis[i], armed: g.armed, meanwhile: g.meanwhile}
	}
	return cis, ret
}

type vanishCI struct {
	nvml.ComputeInstance
	armed     *bool
	meanwhile func()
}

func (c vanishCI) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	if *c.armed && c.meanwhile != nil {
		*c.armed = false
		c.meanwhile()
	}
	if *c.armed {
		*c.armed = false
		if ret := c.ComputeInstance.Destroy(); ret != nvml.SUCCESS {
			panic(ret)
		}
	}
	return c.ComputeInstance.GetInfo()
}

// TestDestroyWhenTheCIVanishesMidway: the compute instance of the device
// being destroyed goes (destroyed by someone else) between the listing of
// the GPU instance's compute instances and the read of it. The GPU
// instance is still there, without a compute instance: the GPU
// instance's destroy decides, as where the CI's own destroy answers
// INVALID_ARGUMENT (TestDestroyStaleCIHandle). DestroyMIGDevice must not
// report the device gone (ErrNotFound) and leave its GPU instance behind:
// the agent takes ErrNotFound for "already destroyed" and goes on to
// create over the GPU instance's memory slices.
func TestDestroyWhenTheCIVanishesMidway(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "3g.40gb", Start: 0}
	sim, m, armed := ciVanishRig(t, d)

	*armed = true
	err := m.DestroyMIGDevice(ctx, 0, d)
	if *armed {
		t.Fatal("the compute instance was never read: the test did not bite")
	}
	left := checkDestroyed(t, sim, err, d)
	if err != nil && !errors.Is(err, gpu.ErrNotFound) {
		t.Logf("DestroyMIGDevice = %v", err)
	}
	if len(left) != 0 {
		t.Errorf("simulator still has %s after the destroy; want the GPU instance destroyed (its CI is gone)", left)
	}
}

// checkDestroyed fails t where DestroyMIGDevice's err says d is gone (nil,
// or ErrNotFound) while GPU 0 of sim still holds it; it returns the layout
// left.
func checkDestroyed(t *testing.T, sim *nvmlsim.Sim, err error, d mig.Device) mig.Layout {
	t.Helper()
	left := simLayout(sim, 0)
	if errors.Is(err, gpu.ErrNotFound) && left.Contains(d) {
		t.Errorf("DestroyMIGDevice = %v (ErrNotFound: gone), but GPU instance %s is still there (layout %q)", err, d, left)
	}
	if err == nil && left.Contains(d) {
		t.Errorf("DestroyMIGDevice succeeded, but GPU instance %s is still there", d)
	}
	return left
}

// TestReadsWhenTheCIVanishesMidway: the compute instance of a device goes
// (destroyed by someone else) between the listing of its GPU instance's
// compute instances and the read of it, while MIGDevices reads the GPU. It
// reads the GPU again and answers for it as it is then (the GPU
// instance without a compute instance), instead of failing with a stale
// handle's ErrNotFound, which would say the device was never there.
func TestReadsWhenTheCIVanishesMidway(t *testing.T) {
	d := mig.Device{Profile: "3g.40gb", Start: 0}
	_, m, armed := ciVanishRig(t, d)
	*armed = true
	devs, err := m.MIGDevices(t.Context(), 0)
	if *armed {
		t.Fatal("the compute instance was never read: the test did not bite")
	}
	if err != nil {
		t.Fatalf("MIGDevices: %v", err)
	}
	if len(devs) != 1 || devs[0].Device() != d || devs[0].CIID != -1 || devs[0].UUID != "" {
		t.Errorf("devices %+v, want only %s, without a compute instance", devs, d)
	}
}

// ciVanishRig is a simulated A100-SXM4-80GB in MIG mode holding device d,
// and a manager over it through ciVanishes, disarmed.
func ciVanishRig(t *testing.T, d mig.Device) (*nvmlsim.Sim, *gpu.NVMLManager, *bool) {
	t.Helper()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	armed := new(bool)
	m := managerOver(t, ciVanishes{Interface: sim, armed: armed}, nil, "")
	enableMIG(t, t.Context(), sim, m, 0)
	if _, err := m.CreateMIGDevice(t.Context(), 0, d); err != nil {
		t.Fatal(err)
	}
	return sim, m, armed
}

// TestDestroyWhenAProcessStartsMidway: a compute process starts on the
// device after DestroyMIGDevice listed none on it and before the destroy of
// its compute instance, which NVML refuses with ERROR_IN_USE. The error
// wraps ErrInUse and names the process, instead of blaming another NVML
// client; the device stays.
func TestDestroyWhenAProcessStartsMidway(t *testing.T) {
	d := mig.Device{Profile: "3g.40gb", Start: 0}
	var pid uint32
	sim, err := destroyWithProcessMidway(t, d, func(sim *nvmlsim.Sim, uuid string) (err error) {
		pid, err = sim.StartProcess(uuid, 1024)
		return err
	})
	if pid == 0 {
		t.Fatal("no process started midway: the test did not bite")
	}
	if !errors.Is(err, gpu.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("PIDs %d", pid)) || strings.Contains(err.Error(), "another NVML client") {
		t.Errorf("DestroyMIGDevice = %v; want ErrInUse naming PID %d, not another client", err, pid)
	}
	if left := simLayout(sim, 0); !left.Contains(d) {
		t.Errorf("layout %q, want %s kept", left, d)
	}
}

// TestDestroyInUseWhenProcessesCannotBeListedAgain: as in
// TestDestroyWhenAProcessStartsMidway, but NVML then fails to list the
// processes again. The error wraps ErrInUse and says the listing failed,
// blaming no other client.
func TestDestroyInUseWhenProcessesCannotBeListedAgain(t *testing.T) {
	sim, err := destroyWithProcessMidway(t, mig.Device{Profile: "3g.40gb", Start: 0}, func(sim *nvmlsim.Sim, uuid string) error {
		if _, err := sim.StartProcess(uuid, 1024); err != nil {
			return err
		}
		return sim.InjectFault(nvmlsim.Fault{Op: "GetComputeRunningProcesses", Nth: 1, Return: nvml.ERROR_UNKNOWN})
	})
	if len(sim.Snapshot().Faults) != 0 {
		t.Fatal("the listing after the refused destroy never ran: the test did not bite")
	}
	if !errors.Is(err, gpu.ErrInUse) || !strings.Contains(err.Error(), "could not be listed again") || strings.Contains(err.Error(), "another NVML client") {
		t.Errorf("DestroyMIGDevice = %v; want ErrInUse saying the processes could not be listed again", err)
	}
}

// destroyWithProcessMidway makes device d on a simulated A100-SXM4-80GB and
// destroys it, with meanwhile run on the simulator (given the device's
// UUID) once DestroyMIGDevice has listed the device's processes, when it
// reads its compute instance (ciVanishes). It returns DestroyMIGDevice's
// error.
func destroyWithProcessMidway(t *testing.T, d mig.Device, meanwhile func(sim *nvmlsim.Sim, uuid string) error) (*nvmlsim.Sim, error) {
	t.Helper()
	ctx := t.Context()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	armed := new(bool)
	var uuid string
	run := func() {
		if err := meanwhile(sim, uuid); err != nil {
			t.Errorf("meanwhile: %v", err)
		}
	}
	m := managerOver(t, ciVanishes{Interface: sim, armed: armed, meanwhile: run}, nil, "")
	enableMIG(t, ctx, sim, m, 0)
	md, err := m.CreateMIGDevice(ctx, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	uuid = md.UUID
	*armed = true
	err = m.DestroyMIGDevice(ctx, 0, d)
	if *armed {
		t.Fatal("the compute instance was never read: the test did not bite")
	}
	return sim, err
}
