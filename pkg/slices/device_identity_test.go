package slices

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// A GPU's NVML index and its device minor number are published apart: a
// node whose minors do not follow the indexes (a GPU taken out, a board
// order differing from PCI order) shows each under its own attribute, on
// the whole GPU and on its MIG devices alike.
func TestIndexAndMinorPublishedApart(t *testing.T) {
	g := gpu.GPU{Index: 2, Minor: 5, UUID: "GPU-2"}
	whole := GPUDevice(g)
	mdev := MIGDevice(g, gpu.MIGDevice{GPUIndex: 2, UUID: "MIG-a", Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, CIID: 0})
	for _, tc := range []struct {
		dev  resourceapi.Device
		attr resourceapi.QualifiedName
		want int64
	}{
		{whole, AttrIndex, 2},
		{whole, AttrMinor, 5},
		{mdev, AttrParentIndex, 2},
		{mdev, AttrParentMinor, 5},
	} {
		a, ok := tc.dev.Attributes[tc.attr]
		if !ok || a.IntValue == nil {
			t.Errorf("%s: no integer attribute %s, want %d", tc.dev.Name, tc.attr, tc.want)
			continue
		}
		if *a.IntValue != tc.want {
			t.Errorf("%s: %s = %d, want %d", tc.dev.Name, tc.attr, *a.IntValue, tc.want)
		}
	}
}

// Each capacity of a MIG device comes from its own count: engines of one
// kind are never published under another's name.
func TestMIGDeviceCapacitiesEach(t *testing.T) {
	g := gpu.GPU{Index: 0, UUID: "GPU-0"}
	d := MIGDevice(g, gpu.MIGDevice{
		UUID: "MIG-a", Profile: "3g.40gb", ProfileID: 9, Placement: mig.Placement{Start: 4, Size: 4}, CIID: 0,
		MemoryMiB: 3, Multiprocessors: 5, CopyEngines: 7, Decoders: 11, Encoders: 13, JPEGEngines: 17, OFAEngines: 19,
	})
	want := map[resourceapi.QualifiedName]int64{
		CapMemory: 3 << 20, CapMultiprocessors: 5, CapCopyEngines: 7, CapDecoders: 11, CapEncoders: 13, CapJPEGEngines: 17, CapOFAEngines: 19,
	}
	got := map[resourceapi.QualifiedName]int64{}
	for name, c := range d.Capacity {
		got[name] = c.Value.Value()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capacities (-want +got):\n%s", diff)
	}
}

// The GPU the planner assumes for a model before a node reports one:
// MIG-capable with MIG mode on (so its devices are MIG devices), the
// model's product name, memory, architecture and compute capability, brand
// Nvidia, minor equal to the index, and no driver versions or PCI address.
func TestPlannedGPUFields(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	got := PlannedGPU(model, 4)
	want := gpu.GPU{
		Index:                 4,
		UUID:                  PlannedGPUUUID,
		ProductName:           model.ProductName,
		Model:                 model,
		MemoryMiB:             model.MemoryMiB,
		MIGCapable:            true,
		MIGMode:               gpu.MIGMode{Current: true, Pending: true},
		Brand:                 "Nvidia",
		Architecture:          model.Architecture,
		CUDAComputeCapability: model.CUDAComputeCapability,
		Minor:                 4,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(mig.Model{})); diff != "" {
		t.Errorf("PlannedGPU(H100-SXM5-80GB, 4) (-want +got):\n%s", diff)
	}
	for _, attr := range []resourceapi.QualifiedName{AttrBrand, AttrArchitecture, AttrCUDAComputeCapability} {
		if _, ok := GPUDevice(got).Attributes[attr]; !ok {
			t.Errorf("planned GPU device lacks attribute %s", attr)
		}
	}
}

// The MIG device the planner expects creating profile@start to give: on
// the GPU's index, its GI and CI IDs not known yet (-1), and the catalog's
// profile ID, placement, memory, multiprocessors and engines (an H100's
// 3g.40gb has NVJPG engines but no OFA, so each count shows as its own).
func TestPlannedMIGFields(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := PlannedGPU(model, 3)
	p, err := model.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	got, err := PlannedMIG(g, mig.Device{Profile: "3g.40gb", Start: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := gpu.MIGDevice{
		GPUIndex:        3,
		ParentUUID:      PlannedGPUUUID,
		Profile:         "3g.40gb",
		ProfileID:       p.ID,
		Placement:       mig.Placement{Start: 4, Size: p.MemorySlices},
		GIID:            -1,
		CIID:            -1,
		MemoryMiB:       p.MemoryMiB,
		Multiprocessors: p.Multiprocessors,
		CopyEngines:     p.CopyEngines,
		Decoders:        p.Decoders,
		Encoders:        p.Encoders,
		JPEGEngines:     p.JPEGEngines,
		OFAEngines:      p.OFAEngines,
	}
	if want.JPEGEngines == want.OFAEngines {
		t.Fatalf("catalog H100 3g.40gb: %d NVJPG and %d OFA engines, want counts that differ", want.JPEGEngines, want.OFAEngines)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PlannedMIG(GPU 3, 3g.40gb@4) (-want +got):\n%s", diff)
	}
}

// Planning on a GPU whose model the catalog lacks fails with an error that
// wraps mig.ErrUnknownModel and names the product.
func TestPlannedMIGUnknownModel(t *testing.T) {
	_, err := PlannedMIG(gpu.GPU{Index: 1, ProductName: "Tesla T4"}, mig.Device{Profile: "1g.10gb"})
	if !errors.Is(err, mig.ErrUnknownModel) || !strings.Contains(err.Error(), "Tesla T4") {
		t.Errorf("PlannedMIG on a Tesla T4 = %v, want an error wrapping %v and naming Tesla T4", err, mig.ErrUnknownModel)
	}
}
