package gpu_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// newerDriver is the simulated NVML of a driver newer than go-nvml's
// header: the GPU instance profile the simulator offers at index gi.from
// is offered at index gi.to (>= nvml.GPU_INSTANCE_PROFILE_COUNT, an index
// go-nvml v0.13.4 has no constant for) and not at gi.from, and likewise
// the compute-instance profile at ci.from on every GPU instance at ci.to
// (>= nvml.COMPUTE_INSTANCE_PROFILE_COUNT); a zero move moves nothing.
// nvml.h, nvmlDeviceGetGpuInstanceProfileInfo: "This API can be used to
// enumerate all MIG profiles supported by NVML in a forward compatible way
// by invoking it on profile values starting from 0, until the API returns
// NVML_ERROR_INVALID_ARGUMENT."
type newerDriver struct {
	nvml.Interface
	gi, ci move
}

// move offers the profile at index from at index to instead, or, with
// also, at both (one profile, one profile ID, at two indices).
type move struct {
	from, to int
	also     bool
}

// info answers for profile index profile with get, the profile moved.
func info[T any](m move, profile int, get func(int) (T, nvml.Return)) (T, nvml.Return) {
	switch {
	case m == move{}:
	case profile == m.from && !m.also:
		var zero T
		return zero, nvml.ERROR_NOT_SUPPORTED
	case profile == m.to:
		return get(m.from)
	}
	return get(profile)
}

func (l newerDriver) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return newerDevice{Device: d, gi: l.gi, ci: l.ci}, ret
}

type newerDevice struct {
	nvml.Device
	gi, ci move
}

func (d newerDevice) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	return info(d.gi, profile, d.Device.GetGpuInstanceProfileInfo)
}

func (d newerDevice) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	gis, ret := d.Device.GetGpuInstances(info)
	for i := range gis {
		gis[i] = newerGI{GpuInstance: gis[i], ci: d.ci}
	}
	return gis, ret
}

type newerGI struct {
	nvml.GpuInstance
	ci move
}

func (g newerGI) GetComputeInstanceProfileInfo(profile, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	return info(g.ci, profile, func(p int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		return g.GpuInstance.GetComputeInstanceProfileInfo(p, eng)
	})
}

// TestWalkSeesAProfileAtAnIndexPastGoNVMLsCount: a GPU instance of a
// profile a newer driver offers at an index past go-nvml's
// GPU_INSTANCE_PROFILE_COUNT (made with that driver's nvidia-smi) holds its
// memory slice like any other; the walk lists it, or the agent would take
// the slice for free, its creates over it failing INSUFFICIENT_RESOURCES
// and its destroys never removing it.
func TestWalkSeesAProfileAtAnIndexPastGoNVMLsCount(t *testing.T) {
	ctx := t.Context()
	sim, _ := newUncataloguedSim(t) // 3g.40gb@0 and a 1g.10gb-me@6 (index 13)
	m := managerOver(t, newerDriver{Interface: sim, gi: move{from: nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, to: nvml.GPU_INSTANCE_PROFILE_COUNT}}, nil, "")
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%d+%d", d.Placement.Start, d.Placement.Size))
	}
	if want := []string{"0+4", "6+1"}; !slices.Equal(got, want) {
		t.Errorf("MIGDevices lists GPU instances at %q, want %q (NVML holds %s): the GI at profile index %d (go-nvml's GPU_INSTANCE_PROFILE_COUNT) is left out",
			got, want, simLayout(sim, 0), nvml.GPU_INSTANCE_PROFILE_COUNT)
	}
}

// TestDestroyRemovesACIOfAProfilePastGoNVMLsCount: a GPU instance split
// (nvidia-smi mig -cci) into a compute instance of a profile a newer
// driver numbers past go-nvml's COMPUTE_INSTANCE_PROFILE_COUNT, no
// process on it. DestroyMIGDevice destroys that CI, then the GI; one that
// did not list it would have the GI destroy answer IN_USE forever, blamed
// on "another NVML client".
func TestDestroyRemovesACIOfAProfilePastGoNVMLsCount(t *testing.T) {
	ctx := t.Context()
	sim, m0 := newSim(t)
	enableMIG(t, ctx, sim, m0, 0)
	// An administrator's 3g.40gb@0 with one 1c.3g compute instance.
	dev, _ := sim.DeviceGetHandleByIndex(0)
	info, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ci, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	m := managerOver(t, newerDriver{Interface: sim, ci: move{from: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, to: nvml.COMPUTE_INSTANCE_PROFILE_COUNT}}, nil, "")
	if err := m.DestroyMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 0}); err != nil {
		t.Errorf("DestroyMIGDevice of a GI with one idle CI failed: %v", err)
	}
	if got := simLayout(sim, 0); len(got) != 0 {
		t.Errorf("NVML holds %q after the destroy, want nothing", got)
	}
}

// TestMIGDevicesWhenOneGIsFullCIProfileIsNotOffered: a GPU instance whose
// full-size compute-instance profile NVML does not offer at the <N>_SLICE
// index (here: a driver numbers it past go-nvml's
// COMPUTE_INSTANCE_PROFILE_COUNT) is listed without a full-size compute
// instance, as one split into smaller ones, instead of failing MIGDevices
// for the whole GPU (and the agent's every pass on the node).
func TestMIGDevicesWhenOneGIsFullCIProfileIsNotOffered(t *testing.T) {
	ctx := t.Context()
	sim, m0 := newSim(t)
	enableMIG(t, ctx, sim, m0, 0)
	for _, d := range []mig.Device{{Profile: "3g.40gb", Start: 0}, {Profile: "1g.10gb", Start: 6}} {
		if _, err := m0.CreateMIGDevice(ctx, 0, d); err != nil {
			t.Fatal(err)
		}
	}
	m := managerOver(t, newerDriver{Interface: sim, ci: move{from: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, to: nvml.COMPUTE_INSTANCE_PROFILE_COUNT}}, nil, "")
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatalf("MIGDevices fails for the whole GPU over one GI's CI profile: %v", err)
	}
	got := map[string]bool{} // device: has a full-size CI
	for _, d := range devs {
		got[d.Device().String()] = d.CIID >= 0
	}
	if want := map[string]bool{"3g.40gb@0": true, "1g.10gb@6": false}; !maps.Equal(got, want) {
		t.Errorf("MIGDevices (device: has a full-size CI) %v, want %v", got, want)
	}
}
