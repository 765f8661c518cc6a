package slices

import (
	"strings"
	"testing"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// A name lacking the start suffix, or with a negative GI profile ID, is no
// MIGDeviceName of that profile at that start.
func TestIsMIGDeviceNameNeedsStartSuffix(t *testing.T) {
	for _, name := range []string{
		"gpu-0-mig-1g10gb-9",    // no start at all
		"gpu-0-mig-1g10gb--1-4", // negative profile ID
	} {
		if IsMIGDeviceName(name, 0, "1g.10gb", 4) {
			t.Errorf("IsMIGDeviceName(%q, 0, 1g.10gb, 4) = true", name)
		}
	}
}

// Profile names are lower-cased into device names, not stripped of capitals.
func TestMIGDeviceNameLowerCases(t *testing.T) {
	if got, want := MIGDeviceName(0, "1G.10GB", 19, 0), "gpu-0-mig-1g10gb-19-0"; got != want {
		t.Errorf("MIGDeviceName(1G.10GB) = %q, want %q", got, want)
	}
	if !IsMIGDeviceName("gpu-0-mig-1g10gb-19-0", 0, "1G.10GB", 0) {
		t.Errorf("IsMIGDeviceName does not match the lower-cased profile")
	}
}

// Only "gpu-N-mig-..." is a MIG device name: "gpu-N-migX" is no name this
// driver makes.
func TestDeviceGPUIndexNeedsMIGDash(t *testing.T) {
	if idx, isMIG, ok := DeviceGPUIndex("gpu-0-migx"); ok {
		t.Errorf("DeviceGPUIndex(gpu-0-migx) = %d, %v, true", idx, isMIG)
	}
}

// A MIG device whose ParentUUID NVML left empty gets its GPU's UUID as
// parentUUID; one that has its own keeps it.
func TestMIGDeviceParentUUIDFallback(t *testing.T) {
	g := gpu.GPU{Index: 1, UUID: "GPU-board"}
	for parent, want := range map[string]string{"": "GPU-board", "GPU-own": "GPU-own"} {
		d := MIGDevice(g, gpu.MIGDevice{UUID: "MIG-x", ParentUUID: parent, Profile: "1g.10gb", ProfileID: 19, CIID: 0})
		a, ok := d.Attributes[AttrParentUUID]
		if !ok || a.StringValue == nil || *a.StringValue != want {
			t.Errorf("ParentUUID %q: parentUUID attribute = %v, want %q", parent, a.StringValue, want)
		}
	}
}

// String attributes are cut to the API's limit on a UTF-8 boundary; one of
// exactly the limit is kept whole.
func TestStrTruncation(t *testing.T) {
	max := resourceapi.DeviceAttributeMaxValueLength
	exact := strings.Repeat("a", max)
	if got := *str(exact).StringValue; got != exact {
		t.Errorf("a %d-byte value became %q", max, got)
	}
	long := strings.Repeat("a", max-1) + "é" // the limit falls inside "é"
	got := *str(long).StringValue
	if !utf8.ValidString(got) || len(got) > max || got != strings.Repeat("a", max-1) {
		t.Errorf("str(%q) = %q (valid UTF-8: %v, %d bytes), want the %d a's before the cut rune", long, got, utf8.ValidString(got), len(got), max-1)
	}
}

// A planned GPU's minor is its index, and so are its devices' minor and
// parentMinor attributes.
func TestPlannedGPUMinorIsIndex(t *testing.T) {
	model, _ := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	g := PlannedGPU(model, 3)
	if m := *GPUDevice(g).Attributes[AttrMinor].IntValue; m != 3 {
		t.Errorf("planned GPU 3: minor %d, want 3", m)
	}
	d, err := PlannedMIGDevice(g, mig.Device{Profile: "3g.40gb", Start: 4})
	if err != nil {
		t.Fatal(err)
	}
	if m := *d.Attributes[AttrParentMinor].IntValue; m != 3 {
		t.Errorf("planned MIG device on GPU 3: parentMinor %d, want 3", m)
	}
}

// Versions are refused when normalising them gives more than the API's
// attribute limit, or a build part after other than three components.
func TestNormalizeVersionEdges(t *testing.T) {
	max := resourceapi.DeviceAttributeMaxValueLength
	fits := "1.2.3+" + strings.Repeat("a", max-6)
	if got, ok := NormalizeVersion(fits); !ok || got != fits {
		t.Errorf("NormalizeVersion(%d bytes) = %q, %v; want it as it is", len(fits), got, ok)
	}
	for _, bad := range []string{fits + "a", "1.2.3.4+5"} {
		if got, ok := NormalizeVersion(bad); ok {
			t.Errorf("NormalizeVersion(%q) = %q, ok", bad, got)
		}
	}
}

// What is published follows the current MIG mode, not a pending one: a GPU
// in MIG mode with "disable" pending still publishes its MIG devices, and
// one with "enable" pending is still whole.
func TestSourcesFollowCurrentMIGMode(t *testing.T) {
	d := gpu.MIGDevice{GPUIndex: 0, UUID: "MIG-a", Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, GIID: 9, CIID: 0}
	inv := Inventory{
		GPUs: []gpu.GPU{
			{Index: 0, UUID: "GPU-0", MIGMode: gpu.MIGMode{Current: true, Pending: false}},
			{Index: 1, UUID: "GPU-1", MIGMode: gpu.MIGMode{Current: false, Pending: true}},
		},
		MIGs: map[int][]gpu.MIGDevice{0: {d}},
	}
	var names []string
	for _, s := range inv.Sources() {
		names = append(names, s.Name)
	}
	if want := []string{"gpu-0-mig-1g10gb-19-0", "gpu-1"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("sources %v, want %v", names, want)
	}
}

// A pool that fails validation is not built.
func TestBuildPoolFromDevicesValidates(t *testing.T) {
	bad := resourceapi.Device{Name: "Not_A_DNS_Label"}
	if _, err := BuildPoolFromDevices("node-a", []resourceapi.Device{bad}); err == nil {
		t.Errorf("BuildPoolFromDevices accepted device %q", bad.Name)
	}
}
