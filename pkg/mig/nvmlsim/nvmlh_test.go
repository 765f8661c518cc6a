package nvmlsim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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
	for i := 0; ; i++ {
		md, ret := d.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			break
		}
		must(t, "GetMigDeviceHandleByIndex", ret)
		id, ret := md.GetGpuInstanceId()
		must(t, "GetGpuInstanceId", ret)
		got = append(got, id)
	}
	want := []int{2, 3, 4}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("GI IDs of MIG devices 0, 1, 2 = %v, want %v (real NVML orders MIG devices by GI ID)", got, want)
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
