package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPublishedInventorySkipsAttributesOfAnotherType: an attribute of the
// expected name but another type (a device not of miglayout's shape) is
// read as absent, not dereferenced: a device whose type is a number is
// skipped, as is a MIG device without a profile, and a MIG device whose
// memory is a string gives no NVML profile values, its GPU read all the
// same.
func TestPublishedInventorySkipsAttributesOfAnotherType(t *testing.T) {
	cat := mig.DefaultCatalog()
	h100, err := cat.Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := migslices.PlannedGPU(h100, 0)
	d, err := migslices.PlannedMIG(g, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	d.UUID = "MIG-whole"
	d.Multiprocessors-- // differs from the catalog: values would be read
	stringMemory := migslices.MIGDevice(g, d)
	stringMemory.Attributes[migslices.AttrMemory] = resourceapi.DeviceAttribute{StringValue: ptr.To("80GiB")}
	numberType := resourceapi.Device{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		migslices.AttrType: {IntValue: ptr.To[int64](1)}, migslices.AttrIndex: {IntValue: ptr.To[int64](1)}}}
	noProfile := resourceapi.Device{Name: "gpu-2-mig", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		migslices.AttrType: {StringValue: ptr.To(migslices.TypeMIG)}, migslices.AttrParentIndex: {IntValue: ptr.To[int64](2)},
		migslices.AttrPlacementStart: {IntValue: ptr.To[int64](0)}}}
	got := publishedInventory(cat, []resourceapi.Device{numberType, stringMemory, noProfile}, nil)
	type gpu struct {
		Index        int32
		Layout       string
		NVMLProfiles int
	}
	var summary []gpu
	for _, s := range got {
		summary = append(summary, gpu{s.Index, s.Layout, len(s.NVMLProfiles)})
	}
	if diff := cmp.Diff([]gpu{{0, "7g.80gb@0", 0}}, summary); diff != "" {
		t.Errorf("GPUs read (-want +got):\n%s", diff)
	}
}
