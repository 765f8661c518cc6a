package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPublishedInventoryNVMLValues: a node read from its ResourceSlices
// carries, as NVMLProfiles, the profile values its devices are published
// with where they differ from the catalog (as its agent would report them),
// and none where they agree.
func TestPublishedInventoryNVMLValues(t *testing.T) {
	cat := mig.DefaultCatalog()
	h100, err := cat.Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := migslices.PlannedGPU(h100, 0)
	device := func(profile string, start int, memMiB int64) resourceapi.Device {
		t.Helper()
		d, err := migslices.PlannedMIG(g, mig.Device{Profile: profile, Start: start})
		if err != nil {
			t.Fatal(err)
		}
		if memMiB > 0 {
			d.MemoryMiB = memMiB
		}
		d.UUID = "MIG-" + profile
		return migslices.MIGDevice(g, d)
	}
	gpus := publishedInventory(cat, []resourceapi.Device{device("3g.40gb", 0, 40600), device("3g.40gb", 4, 40600), device("1g.10gb", 6, 0)}, nil)
	if len(gpus) != 1 {
		t.Fatalf("%d GPUs, want 1", len(gpus))
	}
	p, _ := h100.Profile("3g.40gb")
	want := []v1alpha1.NVMLProfile{{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: int32(p.Multiprocessors), CopyEngines: int32(p.CopyEngines),
		Decoders: int32(p.Decoders), Encoders: int32(p.Encoders), JPEGEngines: int32(p.JPEGEngines), OFAEngines: int32(p.OFAEngines)}}
	if diff := cmp.Diff(want, gpus[0].NVMLProfiles); diff != "" {
		t.Errorf("NVMLProfiles (-want +got):\n%s", diff)
	}
}
