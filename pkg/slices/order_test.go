package slices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// The pool lists devices smallest first across GPUs, so that the
// scheduler's allocator, which takes the first device a request accepts,
// gives a claim open to several sizes the smallest: a 4g.40gb and a
// 3g.40gb (same memory, fewer multiprocessors first), the 1g.10gb of GPU 1
// before GPU 0's 7g.80gb, the whole GPU (MIG off) after every MIG device.
// The planner's hypothetical devices sort the same way.
func TestSortDevicesSmallestFirst(t *testing.T) {
	inv, _ := simInventory(t, "3xA100-SXM4-80GB", map[int]string{0: "7g.80gb@0", 1: "4g.40gb@0,2g.20gb@4,1g.10gb@6"})
	var names []string
	for _, d := range inv.Devices(nil) {
		names = append(names, d.Name)
	}
	want := []string{"gpu-1-mig-1g10gb-19-6", "gpu-1-mig-2g20gb-14-4", "gpu-1-mig-4g40gb-5-0", "gpu-0-mig-7g80gb-0-0", "gpu-2"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("published order (-want +got):\n%s", diff)
	}

	var planned []string
	g := inv.GPUs[1]
	var devs []resourceapi.Device
	for _, d := range mig.MustParseLayout("3g.40gb@4,4g.40gb@0") {
		dev, err := PlannedMIGDevice(g, d)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, dev)
	}
	SortDevices(devs, nil)
	for _, d := range devs {
		planned = append(planned, d.Name)
	}
	if diff := cmp.Diff([]string{"gpu-1-mig-3g40gb-9-4", "gpu-1-mig-4g40gb-5-0"}, planned); diff != "" {
		t.Errorf("planned order (-want +got):\n%s", diff)
	}
}

// Among free devices of one size, the pool lists first the one whose
// placement takes the least room for large profiles from its GPU
// (mig.Model.RoomLost), then by GPU index: the scheduler's allocator then
// gives a 1g.10gb claim GPU 1's 1g.10gb at memory slice 6 before GPU 0's
// at slice 0 (which holds the only 4g.40gb placement; GPU 2's at 4 and 5
// lose the same room and keep GPU and placement order), and a 3g.40gb
// claim a right half before a left one, as the planner places them.
func TestSortDevicesLeastRoomLostFirst(t *testing.T) {
	inv, _ := simInventory(t, "3xA100-SXM4-80GB", map[int]string{
		0: "1g.10gb@0,3g.40gb@4",
		1: "3g.40gb@0,1g.10gb@6",
		2: "1g.10gb@4,1g.10gb@5",
	})
	var names []string
	for _, d := range inv.Devices(nil) {
		names = append(names, d.Name)
	}
	want := []string{
		"gpu-1-mig-1g10gb-19-6", "gpu-2-mig-1g10gb-19-4", "gpu-2-mig-1g10gb-19-5", "gpu-0-mig-1g10gb-19-0",
		"gpu-0-mig-3g40gb-9-4", "gpu-1-mig-3g40gb-9-0",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("published order (-want +got):\n%s", diff)
	}
}

// Devices that tie on size and room lost keep GPU index order where their
// names sort otherwise: GPU 10's 1g.10gb after GPU 2's (by name
// "gpu-10-..." sorts first).
func TestSortDevicesTiesByGPUIndex(t *testing.T) {
	inv, _ := simInventory(t, "11xA100-SXM4-80GB", map[int]string{2: "1g.10gb@4", 10: "1g.10gb@4"})
	var names []string
	for _, d := range inv.Devices(nil) {
		if d.Name == "gpu-2-mig-1g10gb-19-4" || d.Name == "gpu-10-mig-1g10gb-19-4" {
			names = append(names, d.Name)
		}
	}
	if diff := cmp.Diff([]string{"gpu-2-mig-1g10gb-19-4", "gpu-10-mig-1g10gb-19-4"}, names); diff != "" {
		t.Errorf("published order (-want +got):\n%s", diff)
	}
}
