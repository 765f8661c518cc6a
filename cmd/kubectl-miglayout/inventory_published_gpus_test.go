package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPublishedInventoryAsTheAgentReports: a node's GPUs read from its
// ResourceSlices are what its agent would report: a whole GPU with MIG off,
// a GPU with MIG on (and no pending mode change) with its devices as a
// canonical layout and those claims hold as in use, each with its UUID,
// model and every NVML attribute its devices carry, and the profile values
// a device is published with where they differ from the catalog (here a
// 3g.40gb with fewer multiprocessors).
func TestPublishedInventoryAsTheAgentReports(t *testing.T) {
	cat := mig.DefaultCatalog()
	h100, err := cat.Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	newGPU := func(index int, uuid string) gpu.GPU {
		g := migslices.PlannedGPU(h100, index)
		g.UUID, g.Minor, g.NUMANode = uuid, 10+index, ptr.To(1)
		g.DriverVersion, g.CUDADriverVersion, g.PCIBusID, g.PCIeRoot = "580.95.05", "13.0", "0000:07:00.0", "pci0000:00"
		return g
	}
	g0, g1 := newGPU(0, "GPU-zero"), newGPU(1, "GPU-one")
	g0.MIGMode.Current, g0.MIGMode.Pending = false, false
	mig1 := func(profile string, start, multiprocessors int) resourceapi.Device {
		t.Helper()
		d, err := migslices.PlannedMIG(g1, mig.Device{Profile: profile, Start: start})
		if err != nil {
			t.Fatal(err)
		}
		if multiprocessors > 0 {
			d.Multiprocessors = multiprocessors
		}
		d.UUID = "MIG-" + profile
		return migslices.MIGDevice(g1, d)
	}
	whole := migslices.GPUDevice(g0)
	devices := []resourceapi.Device{mig1("3g.40gb", 4, 50), whole, mig1("1g.10gb", 0, 0)}
	allocated := map[string]string{devices[0].Name: "ml/job"}
	got := publishedInventory(cat, devices, allocated)

	version := func(a resourceapi.QualifiedName) string { return *whole.Attributes[a].VersionValue }
	attrs := func(minor int32) *v1alpha1.GPUAttributes {
		return &v1alpha1.GPUAttributes{PCIBusID: "0000:07:00.0", PCIeRoot: "pci0000:00", NUMANode: ptr.To[int32](1), Minor: ptr.To(minor),
			Brand: "Nvidia", Architecture: h100.Architecture, CUDAComputeCapability: version(migslices.AttrCUDAComputeCapability),
			DriverVersion: version(migslices.AttrDriverVersion), CUDADriverVersion: version(migslices.AttrCUDADriverVersion)}
	}
	p, err := h100.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-zero", Product: h100.ProductName, Model: h100.Name, Attributes: attrs(10), Phase: v1alpha1.PhaseReady},
		{Index: 1, UUID: "GPU-one", Product: h100.ProductName, Model: h100.Name, Attributes: attrs(11), Phase: v1alpha1.PhaseReady,
			MIGEnabled: true, MIGPending: true, Layout: "1g.10gb@0,3g.40gb@4", InUse: "3g.40gb@4",
			NVMLProfiles: []v1alpha1.NVMLProfile{{Profile: "3g.40gb", MemoryMiB: p.MemoryMiB, Multiprocessors: 50, CopyEngines: int32(p.CopyEngines),
				Decoders: int32(p.Decoders), Encoders: int32(p.Encoders), JPEGEngines: int32(p.JPEGEngines), OFAEngines: int32(p.OFAEngines)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPUs read from the ResourceSlices (-want +got):\n%s", diff)
	}
}
