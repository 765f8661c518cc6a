package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// otherGIVanishes is the simulated NVML where, once armed, the first
// listing of GPU instances of GI profile ID victimProfile
// (nvmlDeviceGetGpuInstances) is followed at once by the destroy of the
// first GPU instance it listed, by someone else (an administrator's
// `nvidia-smi mig -dgi`, or another tool), before the caller reads it.
//
// nvml.h, nvmlDeviceCreateGpuInstanceWithPlacement: "If the parent device is
// unbound, reset or the GPU instance is destroyed explicitly, the GPU
// instance handle would become invalid"; nvmlGpuInstanceGetInfo answers
// NVML_ERROR_INVALID_ARGUMENT for an invalid handle. The simulator does the
// same for the handle listed before the destroy.
type otherGIVanishes struct {
	nvml.Interface
	victimProfile uint32
	armed         *bool
}

func (l otherGIVanishes) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return giVanishDevice{Device: d, victimProfile: l.victimProfile, armed: l.armed}, ret
}

type giVanishDevice struct {
	nvml.Device
	victimProfile uint32
	armed         *bool
}

func (d giVanishDevice) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	gis, ret := d.Device.GetGpuInstances(info)
	if ret == nvml.SUCCESS && *d.armed && info.Id == d.victimProfile && len(gis) > 0 {
		*d.armed = false
		if r := gis[0].Destroy(); r != nvml.SUCCESS {
			panic(r)
		}
	}
	return gis, ret
}

// TestDestroyWhenAnotherGIVanishesMidway: while DestroyMIGDevice reads the
// GPU to find the GPU instance to destroy (3g.40gb@4), another GPU instance
// of the GPU (a 1g.10gb at 0, without a compute instance) is destroyed by
// someone else between its listing and its read, so NVML answers
// INVALID_ARGUMENT for its stale handle. The GPU instance being destroyed
// is untouched and still there.
//
// Expected: DestroyMIGDevice destroys 3g.40gb@4 (reading the GPU again, as
// it does when a compute instance vanishes midway,
// TestDestroyWhenTheCIVanishesMidway), or fails with an error that is not
// ErrNotFound. It must not answer ErrNotFound ("no such GPU instance")
// while the GPU instance stands: the agent (pkg/agent, Repartitioner.apply
// and rollbackOrphans) takes ErrNotFound from DestroyMIGDevice for
// "already destroyed", records the device done and goes on to create over
// its memory slices.
func TestDestroyWhenAnotherGIVanishesMidway(t *testing.T) {
	ctx := t.Context()
	sim, m, armed := giVanishRig(t)
	target := mig.Device{Profile: "3g.40gb", Start: 4}

	*armed = true
	err := m.DestroyMIGDevice(ctx, 0, target)
	if *armed {
		t.Fatal("the other GPU instance was never listed: the test did not bite")
	}
	checkDestroyed(t, sim, err, target)
}

// giVanishRig is a simulated A100-SXM4-80GB with MIG on, a 3g.40gb MIG
// device at memory slice 4 and another GPU instance, a 1g.10gb at 0 without
// a compute instance (as `nvidia-smi mig -cgi 19` without -C leaves one),
// under a manager whose NVML destroys that 1g.10gb right after listing it
// once *armed is set (otherGIVanishes).
func giVanishRig(t *testing.T) (*nvmlsim.Sim, *gpu.NVMLManager, *bool) {
	t.Helper()
	ctx := t.Context()
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	md, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	victim, err := md.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	armed := new(bool)
	m := managerOver(t, otherGIVanishes{Interface: sim, victimProfile: uint32(victim.ID), armed: armed}, nil, "")
	enableMIG(t, ctx, sim, m, 0)
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 4}); err != nil {
		t.Fatal(err)
	}
	dev, ret := sim.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(victim.NVMLProfile)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 1}); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return sim, m, armed
}
