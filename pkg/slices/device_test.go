package slices

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// simInventory returns the inventory NVML reports for a simulator of spec
// with the given layouts applied through the GPU manager (nil: MIG mode off).
func simInventory(t *testing.T, spec string, layouts map[int]string) (Inventory, *gpu.NVMLManager) {
	t.Helper()
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: spec, Seed: "golden"})
	ctx := context.Background()
	for idx, l := range layouts {
		if _, err := m.SetMIGMode(ctx, idx, true); err != nil {
			t.Fatal(err)
		}
		for _, d := range mig.MustParseLayout(l) {
			if _, err := m.CreateMIGDevice(ctx, idx, d); err != nil {
				t.Fatalf("creating %s on GPU %d: %v", d, idx, err)
			}
		}
	}
	inv, err := ReadInventory(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return inv, m
}

// golden compares got, as indented JSON, with testdata/name (rewritten with
// -update).
func golden(t *testing.T, name string, got any) {
	t.Helper()
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(data)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", path, diff)
	}
}

// The layout of the issue text, 3g.40gb@0,2g.20gb@4,1g.10gb@6,1g.10gb@7, is
// not valid on an A100: 1g.10gb placements are 0..6. This one uses every
// profile size of it on valid placements.
const a100Layout = "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4"

func TestGoldenA100MIG(t *testing.T) {
	inv, _ := simInventory(t, "1xA100-SXM4-80GB", map[int]string{0: a100Layout})
	res, err := BuildPool("node-a", inv.GPUs, inv.MIGs, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := res.Pools["node-a"]
	if len(pool.Slices) != 1 {
		t.Fatalf("pool has %d slices, want 1", len(pool.Slices))
	}
	devs := pool.Slices[0].Devices
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	// Smallest first (SortDevices).
	wantNames := []string{"gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3", "gpu-0-mig-2g20gb-14-0", "gpu-0-mig-3g40gb-9-4"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("device names (-want +got):\n%s", diff)
	}
	golden(t, "a100-sxm4-80gb-mig.json", devs)

	// The whole GPU is not published while MIG mode is on.
	for _, d := range devs {
		if d.Name == "gpu-0" {
			t.Errorf("whole GPU published with MIG mode on")
		}
		if *d.Attributes[AttrType].StringValue != TypeMIG {
			t.Errorf("%s: type %q", d.Name, *d.Attributes[AttrType].StringValue)
		}
	}
	// Attribute values a selector depends on.
	big := devs[3]
	if got := *big.Attributes[AttrMemory].IntValue; got != 40192 {
		t.Errorf("3g.40gb memory attribute = %d MiB, want 40192", got)
	}
	if q := big.Capacity[CapMemory].Value; q.Value() != 40192<<20 {
		got := q.Value()
		t.Errorf("3g.40gb memory capacity = %d bytes, want %d", got, int64(40192)<<20)
	}
	if got := *big.Attributes[AttrDriverVersion].VersionValue; got != "580.95.5" {
		t.Errorf("driverVersion = %q, want 580.95.5", got)
	}
	if got := *big.Attributes[AttrParentUUID].StringValue; got != inv.GPUs[0].UUID {
		t.Errorf("parentUUID = %q, want %q", got, inv.GPUs[0].UUID)
	}
}

func TestGoldenH100Whole(t *testing.T) {
	inv, _ := simInventory(t, "1xH100-SXM5-80GB", nil)
	res, err := BuildPool("node-h", inv.GPUs, inv.MIGs, nil)
	if err != nil {
		t.Fatal(err)
	}
	devs := res.Pools["node-h"].Slices[0].Devices
	if len(devs) != 1 || devs[0].Name != "gpu-0" {
		t.Fatalf("devices = %v, want the whole GPU gpu-0", devs)
	}
	golden(t, "h100-sxm5-80gb-whole.json", devs)
	if got := *devs[0].Attributes[AttrType].StringValue; got != TypeGPU {
		t.Errorf("type = %q", got)
	}
	if got := *devs[0].Attributes[AttrCUDAComputeCapability].VersionValue; got != "9.0.0" {
		t.Errorf("cudaComputeCapability = %q, want 9.0.0", got)
	}
}

// A GPU with MIG mode on and no GPU instance publishes nothing; a GI without
// its CI is not published.
func TestSourcesMIGRules(t *testing.T) {
	inv, _ := simInventory(t, "2xA100-SXM4-80GB", map[int]string{1: ""})
	if got := len(inv.Sources()); got != 1 {
		t.Fatalf("sources = %d, want 1 (gpu-0 whole, gpu-1 MIG with no device)", got)
	}
	inv.MIGs[1] = []gpu.MIGDevice{{GPUIndex: 1, Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, GIID: 3, CIID: -1}}
	if srcs := inv.Sources(); len(srcs) != 1 || srcs[0].Name != "gpu-0" {
		t.Errorf("a GI without CI was published: %v", srcs)
	}
	if _, ok := inv.Lookup("gpu-1"); ok {
		t.Errorf("gpu-1 (MIG mode on) found by Lookup")
	}
	if s, ok := inv.Lookup("gpu-0"); !ok || s.MIG != nil {
		t.Errorf("Lookup(gpu-0) = %v, %v", s, ok)
	}
}

// The planner's devices are the published ones but for the UUID (the PCIe
// root of their GPU included, an attribute a claim's matchAttribute reads).
func TestPlannedMatchesReal(t *testing.T) {
	inv, _ := simInventory(t, "1xA100-SXM4-80GB", map[int]string{0: a100Layout})
	g := inv.GPUs[0]
	g.PCIeRoot, g.NUMANode = "pci0000:00", ptr.To(1)
	for _, real := range inv.MIGs[0] {
		planned, err := PlannedMIGDevice(g, real.Device())
		if err != nil {
			t.Fatal(err)
		}
		want := MIGDevice(g, real)
		if a := want.Attributes[AttrPCIeRoot]; a.StringValue == nil || *a.StringValue != "pci0000:00" {
			t.Errorf("%s: pcieRoot %v, want pci0000:00, its GPU's", real.Device(), a.StringValue)
		}
		if a := want.Attributes[AttrNUMANode]; a.IntValue == nil || *a.IntValue != 1 {
			t.Errorf("%s: numaNode %v, want 1, its GPU's", real.Device(), a.IntValue)
		}
		want.Attributes[AttrUUID] = str(PlannedUUID)
		if diff := cmp.Diff(want, planned); diff != "" {
			t.Errorf("planned %s differs from the real device (-real +planned):\n%s", real.Device(), diff)
		}
	}
	// From the model alone.
	model, _ := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	d, err := PlannedMIGDevice(PlannedGPU(model, 3), mig.Device{Profile: "3g.40gb", Start: 4})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "gpu-3-mig-3g40gb-9-4" || *d.Attributes[AttrUUID].StringValue != PlannedUUID || *d.Attributes[AttrParentUUID].StringValue != PlannedGPUUUID {
		t.Errorf("planned device = %s uuid %s parent %s", d.Name, *d.Attributes[AttrUUID].StringValue, *d.Attributes[AttrParentUUID].StringValue)
	}
	if err := ValidateDevice(d); err != nil {
		t.Error(err)
	}
	for _, bad := range []mig.Device{{Profile: "1g.10gb", Start: 7}, {Profile: "5g.50gb", Start: 0}} {
		if _, err := PlannedMIGDevice(inv.GPUs[0], bad); err == nil {
			t.Errorf("PlannedMIGDevice(%s) succeeded", bad)
		}
	}
	if _, err := PlannedMIGDevice(gpu.GPU{ProductName: "Tesla T4"}, mig.Device{Profile: "1g.10gb"}); err == nil || !strings.Contains(err.Error(), "Tesla T4") {
		t.Errorf("unknown model: %v", err)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		gpu, id, start int
		profile, want  string
	}{
		{0, 9, 0, "3g.40gb", "gpu-0-mig-3g40gb-9-0"},
		{7, 20, 6, "1g.10gb+me", "gpu-7-mig-1g10gbme-20-6"},
		{12, 0, 0, "7g.80gb", "gpu-12-mig-7g80gb-0-0"},
		{1, 32, 0, "1g.24gb+gfx", "gpu-1-mig-1g24gbgfx-32-0"},
		{2, 9, 4, "3g.90gb", "gpu-2-mig-3g90gb-9-4"}, // a 9 is kept
	}
	for _, tc := range tests {
		got := MIGDeviceName(tc.gpu, tc.profile, tc.id, tc.start)
		if got != tc.want {
			t.Errorf("MIGDeviceName(%d, %q, %d, %d) = %q, want %q", tc.gpu, tc.profile, tc.id, tc.start, got, tc.want)
		}
		if idx, isMIG, ok := DeviceGPUIndex(got); !ok || !isMIG || idx != tc.gpu {
			t.Errorf("DeviceGPUIndex(%q) = %d, %v, %v", got, idx, isMIG, ok)
		}
	}
	if idx, isMIG, ok := DeviceGPUIndex("gpu-3"); !ok || isMIG || idx != 3 {
		t.Errorf("DeviceGPUIndex(gpu-3) = %d, %v, %v", idx, isMIG, ok)
	}
	for _, bad := range []string{"gpu-", "gpu-x", "gpu-01", "gpu-1-", "gpu-1-foo", "nic-0", "gpu--1", "3", "3-mig-x"} {
		if _, _, ok := DeviceGPUIndex(bad); ok {
			t.Errorf("DeviceGPUIndex(%q) ok", bad)
		}
	}
}

func TestNormalizeVersion(t *testing.T) {
	for in, want := range map[string]string{
		"8.0": "8.0.0", "580.95.05": "580.95.5", "13.0": "13.0.0", "12": "12.0.0", "535.104.05.01": "535.104.5+01", "10.0.0": "10.0.0",
		"535.104.5+01": "535.104.5+01", // normalised already
	} {
		got, ok := NormalizeVersion(in)
		if !ok || got != want {
			t.Errorf("NormalizeVersion(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if !semverRE.MatchString(got) {
			t.Errorf("%q is not semver", got)
		}
		if again, ok := NormalizeVersion(got); !ok || again != got {
			t.Errorf("NormalizeVersion(%q) = %q, %v; want it unchanged", got, again, ok)
		}
	}
	for _, bad := range []string{"", "a.b", "1..2", "1.-2", "1.+2", "r580", "1.2+3", "1.2.3+", "1.2.3+a_b"} {
		if got, ok := NormalizeVersion(bad); ok {
			t.Errorf("NormalizeVersion(%q) = %q, ok", bad, got)
		}
	}
}

// Unknown values are not published as empty strings or bogus versions.
func TestUnknownValuesOmitted(t *testing.T) {
	d := GPUDevice(gpu.GPU{Index: 2, UUID: "GPU-x", MemoryMiB: 1024, DriverVersion: "weird"})
	for _, name := range []resourceapi.QualifiedName{AttrDriverVersion, AttrProductName, AttrPCIBusID, AttrPCIeRoot, AttrNUMANode, AttrCUDADriverVersion} {
		if _, ok := d.Attributes[name]; ok {
			t.Errorf("attribute %s published for an unknown value", name)
		}
	}
	if _, ok := d.Capacity[CapMultiprocessors]; ok {
		t.Errorf("multiprocessors published for an unknown model")
	}
	// Nor for a model that gives no SM count.
	d = GPUDevice(gpu.GPU{Index: 2, UUID: "GPU-x", MemoryMiB: 1024, Model: &mig.Model{Name: "X"}})
	if _, ok := d.Capacity[CapMultiprocessors]; ok {
		t.Errorf("multiprocessors published for a model without an SM count")
	}
	if err := ValidateDevice(d); err != nil {
		t.Error(err)
	}
}

func TestIsMIGDeviceName(t *testing.T) {
	for name, want := range map[string]bool{
		MIGDeviceName(0, "1g.10gb-me", 21, 6): true,
		MIGDeviceName(0, "1g.10gb-me", 7, 6):  true,
		MIGDeviceName(1, "1g.10gb-me", 21, 6): false, // another GPU
		MIGDeviceName(0, "1g.10gb-me", 21, 5): false, // another start
		MIGDeviceName(0, "1g.10gb", 19, 6):    false, // another profile
		"gpu-0-mig-1g10gbme-x-6":              false,
		"gpu-0-mig-1g10gbme--6":               false,
		"gpu-0-mig-1g10gbme-016-6":            false,
		"21-6":                                false, // the GPU and profile prefix missing
	} {
		if got := IsMIGDeviceName(name, 0, "1g.10gb-me", 6); got != want {
			t.Errorf("IsMIGDeviceName(%q) = %v, want %v", name, got, want)
		}
	}
}
