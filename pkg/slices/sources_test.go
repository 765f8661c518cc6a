package slices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestReadInventoryReadsMIGDevicesOfMIGGPUsOnly: the inventory holds MIG
// devices for the GPUs whose MIG mode is on, and no entry for the others.
func TestReadInventoryReadsMIGDevicesOfMIGGPUsOnly(t *testing.T) {
	inv, _ := simInventory(t, "2xA100-SXM4-80GB", map[int]string{1: "3g.40gb@4"})
	if _, ok := inv.MIGs[0]; ok {
		t.Errorf("MIG devices read for GPU 0, whose MIG mode is off: %v", inv.MIGs[0])
	}
	if got := len(inv.MIGs[1]); got != 1 {
		t.Errorf("GPU 1: %d MIG devices, want 1", got)
	}
}

// TestSourcesPlacementOrderAndUsableDevices: a GPU's MIG devices are
// published by placement start whatever order they are listed in, and only
// those with a compute instance and a UUID (a container can use no other).
func TestSourcesPlacementOrderAndUsableDevices(t *testing.T) {
	dev := func(start, ciID int, uuid string) gpu.MIGDevice {
		return gpu.MIGDevice{GPUIndex: 0, UUID: uuid, Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: start, Size: 1}, GIID: start + 1, CIID: ciID}
	}
	inv := Inventory{
		GPUs: []gpu.GPU{{Index: 0, UUID: "GPU-0", MIGMode: gpu.MIGMode{Current: true, Pending: true}}},
		MIGs: map[int][]gpu.MIGDevice{0: {
			dev(5, 0, "MIG-5"),
			dev(1, 0, "MIG-1"),
			dev(3, 0, ""),       // no UUID
			dev(4, -1, "MIG-4"), // no compute instance
			dev(0, 0, "MIG-0"),
		}},
	}
	var got []string
	for _, s := range inv.Sources() {
		got = append(got, s.Name)
	}
	want := []string{"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-1g10gb-19-5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
}

// TestSliceCapacityCountsCounterConsumers: a device that consumes counters
// (a partitionable device) is an advanced feature, so a slice holding one
// takes 64 devices, not 128.
func TestSliceCapacityCountsCounterConsumers(t *testing.T) {
	devices := fakeDevices(2, 0)
	if got := SliceCapacity(devices); got != resourceapi.ResourceSliceMaxDevices {
		t.Fatalf("plain devices: capacity %d, want %d", got, resourceapi.ResourceSliceMaxDevices)
	}
	devices[1].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "memory"}}
	if got := SliceCapacity(devices); got != resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures {
		t.Errorf("a device consuming counters: capacity %d, want %d", got, resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures)
	}
}

// TestNormalizeVersionBuildHyphen: build metadata may hold hyphens, as
// semantic versions allow ("535.104.05.rc-1" -> "535.104.5+rc-1").
func TestNormalizeVersionBuildHyphen(t *testing.T) {
	if got, ok := NormalizeVersion("535.104.05.rc-1"); !ok || got != "535.104.5+rc-1" {
		t.Errorf("NormalizeVersion(535.104.05.rc-1) = %q, %v; want 535.104.5+rc-1", got, ok)
	}
}

// TestSortDevicesByPlacementThenName: devices that tie on size, room lost
// and GPU (MIG devices of a GPU the catalog lacks, which lose no room the
// catalog can tell) go by placement start, whatever their names; devices
// that tie on all that go by name.
func TestSortDevicesByPlacementThenName(t *testing.T) {
	g := gpu.GPU{Index: 0, UUID: "GPU-0", MIGMode: gpu.MIGMode{Current: true, Pending: true}}
	mk := func(profile string, id, start int) resourceapi.Device {
		return MIGDevice(g, gpu.MIGDevice{GPUIndex: 0, UUID: "MIG-x", Profile: profile, ProfileID: id, Placement: mig.Placement{Start: start, Size: 1},
			CIID: 0, MemoryMiB: 9856, Multiprocessors: 14})
	}
	devs := []resourceapi.Device{mk("1g.10gb", 19, 3), mk("1g.10gb-me", 21, 0)}
	SortDevices(devs, nil)
	var got []string
	for _, d := range devs {
		got = append(got, d.Name)
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-1g10gbme-21-0", "gpu-0-mig-1g10gb-19-3"}, got); diff != "" {
		t.Errorf("order by placement (-want +got):\n%s", diff)
	}
	devs = []resourceapi.Device{{Name: "dev-b"}, {Name: "dev-a"}}
	SortDevices(devs, nil)
	if devs[0].Name != "dev-a" {
		t.Errorf("order of devices alike but for their names: %s, %s; want dev-a first", devs[0].Name, devs[1].Name)
	}
}
