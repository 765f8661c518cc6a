package slices

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// listingManager answers GPUs and MIGDevices from its fields; the other
// gpu.Manager methods are not called by ReadInventory.
type listingManager struct {
	gpu.Manager
	gpus    []gpu.GPU
	gpusErr error
	migs    map[int][]gpu.MIGDevice
	migErr  map[int]error
}

func (m listingManager) GPUs(context.Context) ([]gpu.GPU, error) { return m.gpus, m.gpusErr }

func (m listingManager) MIGDevices(_ context.Context, i int) ([]gpu.MIGDevice, error) {
	return m.migs[i], m.migErr[i]
}

// An inventory NVML cannot read fully is no inventory: a failed GPU listing
// or a failed MIG device listing of one GPU fails ReadInventory (with the
// cause, and the GPU named), rather than giving a pool that lacks devices
// still there.
func TestReadInventoryFailsOnListingErrors(t *testing.T) {
	gpus := []gpu.GPU{
		{Index: 0, UUID: "GPU-0"},
		{Index: 1, UUID: "GPU-1", MIGMode: gpu.MIGMode{Current: true, Pending: true}},
	}
	nvmlErr := errors.New("NVML: unknown error")

	if _, err := ReadInventory(t.Context(), listingManager{gpus: gpus[:1], gpusErr: nvmlErr}); !errors.Is(err, nvmlErr) {
		t.Errorf("ReadInventory with a failed GPU listing = %v, want an error wrapping %v", err, nvmlErr)
	}

	inv, err := ReadInventory(t.Context(), listingManager{gpus: gpus, migErr: map[int]error{1: nvmlErr}})
	if !errors.Is(err, nvmlErr) {
		t.Fatalf("ReadInventory with a failed MIG device listing of GPU 1 = %v (inventory %+v), want an error wrapping %v", err, inv, nvmlErr)
	}
	if want := "listing MIG devices of GPU 1"; !strings.Contains(err.Error(), want) {
		t.Errorf("ReadInventory error %q does not name the GPU (want %q)", err, want)
	}
}

// The inventory's sources come in GPU index order whatever order the GPUs
// are listed in.
func TestSourcesOrderGPUsByIndex(t *testing.T) {
	inv := Inventory{GPUs: []gpu.GPU{{Index: 2, UUID: "GPU-2"}, {Index: 0, UUID: "GPU-0"}, {Index: 1, UUID: "GPU-1"}}}
	var got []string
	for _, s := range inv.Sources() {
		got = append(got, s.Name)
	}
	if want := []string{"gpu-0", "gpu-1", "gpu-2"}; !slices.Equal(got, want) {
		t.Errorf("sources %v, want %v", got, want)
	}
}

// A GPU with MIG mode on whose model the catalog lacks still has its MIG
// devices published (NVML knows them; only the room they lose is unknown).
func TestDevicesOfUncataloguedGPU(t *testing.T) {
	inv := Inventory{
		GPUs: []gpu.GPU{{Index: 0, UUID: "GPU-0", ProductName: "NVIDIA Future GPU", MIGMode: gpu.MIGMode{Current: true, Pending: true}}},
		MIGs: map[int][]gpu.MIGDevice{0: {
			{GPUIndex: 0, UUID: "MIG-b", Profile: "1g.12gb", ProfileID: 19, Placement: mig.Placement{Start: 1, Size: 1}, GIID: 2, CIID: 0, MemoryMiB: 12000},
			{GPUIndex: 0, UUID: "MIG-a", Profile: "1g.12gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, GIID: 1, CIID: 0, MemoryMiB: 12000},
		}},
	}
	var got []string
	for _, d := range inv.Devices(nil) {
		got = append(got, d.Name)
	}
	if want := []string{"gpu-0-mig-1g12gb-19-0", "gpu-0-mig-1g12gb-19-1"}; !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
}

// ReadInventory reads MIG devices by the current MIG mode, not a pending
// one: a GPU in MIG mode with "disable" pending still has its devices read,
// and one with "enable" pending is not asked for any.
func TestReadInventoryFollowsCurrentMIGMode(t *testing.T) {
	d := gpu.MIGDevice{GPUIndex: 0, UUID: "MIG-a", Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, GIID: 9, CIID: 0}
	m := listingManager{
		gpus: []gpu.GPU{
			{Index: 0, UUID: "GPU-0", MIGMode: gpu.MIGMode{Current: true, Pending: false}},
			{Index: 1, UUID: "GPU-1", MIGMode: gpu.MIGMode{Current: false, Pending: true}},
		},
		migs:   map[int][]gpu.MIGDevice{0: {d}},
		migErr: map[int]error{1: errors.New("GPU 1 is not in MIG mode")},
	}
	inv, err := ReadInventory(t.Context(), m)
	if err != nil {
		t.Fatalf("ReadInventory = %v, want nil (GPU 1's MIG devices not read)", err)
	}
	if got := len(inv.MIGs[0]); got != 1 {
		t.Errorf("GPU 0 (MIG mode on, disable pending): %d MIG devices read, want 1", got)
	}
	if _, ok := inv.MIGs[1]; ok {
		t.Errorf("GPU 1 (MIG mode off, enable pending): MIG devices read: %v", inv.MIGs[1])
	}
}
