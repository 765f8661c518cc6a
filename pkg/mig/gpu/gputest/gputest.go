// Package gputest gives tests a GPU manager over the NVML simulator.
package gputest

import (
	"os"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// Simulated returns a simulator of cfg and the GPU manager over it, with
// the default catalog (mig.DefaultCatalog); the manager is shut down when
// the test ends, and a shutdown that fails fails the test. A configuration
// the simulator refuses fails the test.
func Simulated(t testing.TB, cfg nvmlsim.Config) (*nvmlsim.Sim, *gpu.NVMLManager) {
	t.Helper()
	return SimulatedOver(t, cfg, func(l nvml.Interface) nvml.Interface { return l })
}

// EveryModel runs fn as a subtest for each model of mig.DefaultCatalog, on
// a simulator of one GPU of that model (GPU 0, MIG mode off) and the
// manager over it (Simulated).
func EveryModel(t *testing.T, fn func(t *testing.T, model *mig.Model, sim *nvmlsim.Sim, m *gpu.NVMLManager)) {
	t.Helper()
	for _, model := range mig.DefaultCatalog().Models() {
		t.Run(model.Name, func(t *testing.T) {
			sim, m := Simulated(t, nvmlsim.Config{Spec: model.Name})
			fn(t, model, sim, m)
		})
	}
}

// SimulatedOver is Simulated with the manager over wrap(sim): an NVML that
// answers some calls otherwise than the simulator (ProfileReads).
func SimulatedOver(t testing.TB, cfg nvmlsim.Config, wrap func(nvml.Interface) nvml.Interface) (*nvmlsim.Sim, *gpu.NVMLManager) {
	t.Helper()
	sim, err := nvmlsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewNVML(wrap(sim), mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("shutting down the GPU manager: %v", err)
		}
	})
	return sim, m
}

// ProfileReads is an NVML whose nvmlDeviceGetGpuInstanceProfileInfo is
// counted in Calls (if set) and, with OnlyInMIGMode, answers
// ERROR_NOT_SUPPORTED while the GPU's MIG mode is off, as nvml.h documents it
// ("if device doesn't have MIG mode enabled"); driver 580, which the
// simulator follows, answers anyway.
type ProfileReads struct {
	nvml.Interface
	Calls         *int
	OnlyInMIGMode bool
}

// OnlyInMIGMode wraps lib in ProfileReads answering as nvml.h documents.
func OnlyInMIGMode(lib nvml.Interface) nvml.Interface {
	return ProfileReads{Interface: lib, OnlyInMIGMode: true}
}

// DeviceGetHandleByIndex returns the GPU's handle with its profile reads
// counted and answered as n says.
func (n ProfileReads) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := n.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return profileReadsDevice{Device: d, n: n}, ret
}

type profileReadsDevice struct {
	nvml.Device
	n ProfileReads
}

func (d profileReadsDevice) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if d.n.Calls != nil {
		*d.n.Calls++
	}
	if d.n.OnlyInMIGMode {
		if cur, _, ret := d.Device.GetMigMode(); ret != nvml.SUCCESS || cur != nvml.DEVICE_MIG_ENABLE {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
	}
	return d.Device.GetGpuInstanceProfileInfo(profile)
}

// HardwareEnv is the variable that lets tests run against the machine's
// real GPUs and NVIDIA driver (read-only checks; skipped without it).
const HardwareEnv = "MIGLAYOUT_NVML_HARDWARE"

// Hardware skips the test unless HardwareEnv is "1", and returns the
// driver root to load NVML from (NVIDIA_DRIVER_ROOT, the agent's
// --nvidia-driver-root; empty: the library search path).
func Hardware(t testing.TB) (driverRoot string) {
	t.Helper()
	if os.Getenv(HardwareEnv) != "1" {
		t.Skipf("set %s=1 on a machine with an NVIDIA GPU and driver", HardwareEnv)
	}
	return os.Getenv("NVIDIA_DRIVER_ROOT")
}

// WithoutGPU is an NVML from which the GPU of index Gone was taken off the
// node without a reboot (nvidia-smi drain, a PCI remove): it lists one GPU
// fewer and numbers those after it one lower, as NVML enumerates GPUs in
// PCI order, their MIG devices kept.
type WithoutGPU struct {
	nvml.Interface
	Gone int
}

// DeviceGetCount counts one GPU fewer.
func (w WithoutGPU) DeviceGetCount() (int, nvml.Return) {
	n, ret := w.Interface.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return n, ret
	}
	return n - 1, ret
}

// DeviceGetHandleByIndex returns the handle of the GPU now numbered i.
func (w WithoutGPU) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i >= w.Gone {
		i++
	}
	return w.Interface.DeviceGetHandleByIndex(i)
}

// CreateGPUInstance creates, straight through the simulator's NVML, a GPU
// instance of GI profile index profile (nvml.GPU_INSTANCE_PROFILE_*) at the
// placement start, size memory slices, on GPU gpuIndex, without a compute
// instance (as a crash between the two creates, or nvidia-smi, leaves
// one). Any refusal fails the test.
func CreateGPUInstance(t testing.TB, sim *nvmlsim.Sim, gpuIndex, profile, start, size int) nvml.GpuInstance {
	t.Helper()
	dev, ret := sim.DeviceGetHandleByIndex(gpuIndex)
	if ret != nvml.SUCCESS {
		t.Fatalf("getting GPU %d: %v", gpuIndex, ret)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		t.Fatalf("reading GI profile %d of GPU %d: %v", profile, gpuIndex, ret)
	}
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
	if ret != nvml.SUCCESS {
		t.Fatalf("creating GI profile %d at %d+%d on GPU %d: %v", profile, start, size, gpuIndex, ret)
	}
	return gi
}
