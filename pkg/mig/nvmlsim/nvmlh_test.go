package nvmlsim

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// migDeviceHandles are d's MIG devices by index, up to the first
// ERROR_NOT_FOUND.
func migDeviceHandles(t *testing.T, d nvml.Device) []nvml.Device {
	t.Helper()
	var out []nvml.Device
	for i := 0; ; i++ {
		md, ret := d.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			return out
		}
		must(t, "GetMigDeviceHandleByIndex", ret)
		out = append(out, md)
	}
}

// TestMIGDeviceIndexFollowsGIID: real NVML numbers MIG devices by GPU
// instance ID, not by placement start. A published A30 transcript (driver
// 535.183.01) creates 1g.6gb at 0:1 (GI 3), 1g.6gb at 1:1 (GI 4), then
// 2g.12gb at 2:2 (GI 2); `nvidia-smi` then shows MIG Dev 0 = GI 2, Dev 1 =
// GI 3, Dev 2 = GI 4, and `nvidia-smi -L` lists "MIG 2g.12gb Device 0"
// first.
func TestMIGDeviceIndexFollowsGIID(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA30-24GB"})
	d := migOn(t, s, 0)
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1)
	mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2)
	var got []int
	for _, md := range migDeviceHandles(t, d) {
		id, ret := md.GetGpuInstanceId()
		must(t, "GetGpuInstanceId", ret)
		got = append(got, id)
	}
	want := []int{2, 3, 4}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("GI IDs of MIG devices 0, 1, 2 = %v, want %v (real NVML orders MIG devices by GI ID)", got, want)
	}
}

// TestSmallerCIProfilesOffered: real NVML offers compute instance profiles
// smaller than the GI. The same A30 transcript's `nvidia-smi mig -lcip -gi 2`
// on a 2g.12gb GI lists "MIG 1c.2g.12gb, Profile ID 0, 0/2" next to
// "MIG 2g.12gb, Profile ID 1*"; the MIG User Guide creates several CIs in
// one GI (`nvidia-smi mig -cci 0,0,0 -gi 1`). nvmlGpuInstance-
// GetComputeInstanceProfileInfo answers NOT_SUPPORTED only "If profile isn't
// supported".
func TestSmallerCIProfilesOffered(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA30-24GB"})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2)
	info, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatalf("1-slice CI profile of a 2g.12gb GI = %v, want SUCCESS (nvidia-smi lists 1c.2g.12gb, 2 instances)", ret)
	}
	if info.SliceCount != 1 || info.InstanceCount != 2 {
		t.Errorf("1c.2g.12gb = %+v, want SliceCount 1, InstanceCount 2", info)
	}
	for i := range 2 {
		_, ret := g.CreateComputeInstance(&info)
		wantRet(t, fmt.Sprintf("CreateComputeInstance(1c.2g.12gb) #%d", i+1), ret, nvml.SUCCESS)
	}
}

// TestPossiblePlacementsWithMIGOff: nvml.h, nvmlDeviceGetGpuInstance-
// PossiblePlacements_v2: "This API only returns all the possible placements
// for the given profile regardless of whether MIG is enabled or not."
func TestPossiblePlacementsWithMIGOff(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	pls, ret := d.GetGpuInstancePossiblePlacements(&nvml.GpuInstanceProfileInfo{Id: 9}) // 3g on A100
	if ret != nvml.SUCCESS || len(pls) != 2 {
		t.Errorf("GetGpuInstancePossiblePlacements(3g) with MIG off = %v, %v; want [0:4 4:4], SUCCESS", pls, ret)
	}
}

// TestSmallerCIsShareTheGI: CIs of a 7g GI take compute slices at their
// profile's placements (3c.7g at 4, then 0, so a 1c.7g still fits at 3), up to
// each profile's InstanceCount, and each is a MIG device of its own name;
// the GI cannot be destroyed while one is left.
func TestSmallerCIsShareTheGI(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	p := &ciPlacer{t: t, g: g}
	ci, create := p.profile, p.create
	c1, c3, c4 := ci(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE), ci(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE), ci(nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE)
	create(c3, nvml.SUCCESS)
	create(c3, nvml.SUCCESS)
	create(c3, nvml.ERROR_INSUFFICIENT_RESOURCES) // InstanceCount 2
	create(c4, nvml.ERROR_INSUFFICIENT_RESOURCES) // 4c.7g only at 0
	if n, ret := g.GetComputeInstanceRemainingCapacity(&c1); ret != nvml.SUCCESS || n != 1 {
		t.Errorf("remaining 1c.7g beside two 3c.7g = %d, %v; want 1 (at 3)", n, ret)
	}
	create(c1, nvml.SUCCESS)
	create(c1, nvml.ERROR_INSUFFICIENT_RESOURCES)
	if got, want := fmt.Sprint(p.placed), "[4:3 0:3 3:1]"; got != want {
		t.Errorf("CI placements %s, want %s", got, want)
	}
	var names []string
	for _, md := range migDeviceHandles(t, d) {
		name, ret := md.GetName()
		must(t, "GetName", ret)
		names = append(names, name)
	}
	want := "[NVIDIA A100 80GB PCIe MIG 3c.7g.80gb NVIDIA A100 80GB PCIe MIG 3c.7g.80gb NVIDIA A100 80GB PCIe MIG 1c.7g.80gb]"
	if got := fmt.Sprint(names); got != want {
		t.Errorf("MIG devices %s, want %s", got, want)
	}
	wantRet(t, "GpuInstance.Destroy with CIs", g.Destroy(), nvml.ERROR_IN_USE)
}

// TestSmallerCIsShareGIMemory: the compute instances of one GI share its
// memory (MIG User Guide: memory slices belong to the GPU instance, compute
// instances split only its SMs): two 1c.3g.40gb CIs of one 3g.40gb GI
// cannot each hold a 30000 MiB process.
func TestSmallerCIsShareGIMemory(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	info, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(t, "CI profile 1c.3g", ret)
	var uuids []string
	for range 2 {
		ci, ret := g.CreateComputeInstance(&info)
		must(t, "CreateComputeInstance(1c.3g)", ret)
		uuids = append(uuids, migUUIDOf(t, s, 0, ci))
	}
	if _, err := s.StartProcess(uuids[0], 30000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartProcess(uuids[1], 30000); err == nil {
		t.Errorf("two 30000 MiB processes started in one 3g.40gb GI (40 GB): its CIs share its memory")
	}
}

// ciPlacer makes compute instances on GPU instance g and records where
// NVML placed each ("start:size").
type ciPlacer struct {
	t      *testing.T
	g      nvml.GpuInstance
	placed []string
}

// profile is g's compute-instance profile of index profile (shared
// engines).
func (c *ciPlacer) profile(profile int) nvml.ComputeInstanceProfileInfo {
	c.t.Helper()
	info, ret := c.g.GetComputeInstanceProfileInfo(profile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(c.t, fmt.Sprintf("CI profile %d", profile), ret)
	return info
}

// create makes a compute instance of info and checks NVML answers want.
func (c *ciPlacer) create(info nvml.ComputeInstanceProfileInfo, want nvml.Return) {
	c.t.Helper()
	h, ret := c.g.CreateComputeInstance(&info)
	wantRet(c.t, fmt.Sprintf("CreateComputeInstance(%d slices)", info.SliceCount), ret, want)
	if ret == nvml.SUCCESS {
		in, ret := h.GetInfo()
		must(c.t, "ComputeInstance.GetInfo", ret)
		c.placed = append(c.placed, fmt.Sprintf("%d:%d", in.Placement.Start, in.Placement.Size))
	}
}
