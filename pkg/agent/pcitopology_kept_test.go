package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// failingGPUs is a gpu.Manager that lists its GPUs with an error, as
// Manager.GPUs does when NVML counts GPUs it cannot read.
type failingGPUs struct {
	listedGPUs
	err error
}

func (f failingGPUs) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	gpus, _ := f.listedGPUs.GPUs(ctx)
	return gpus, f.err
}

// pciLink makes sysfs under sys show the PCI device busID at path (under
// devices/) with numa as its numa_node.
func pciLink(t *testing.T, sys, busID, path, numa string) {
	t.Helper()
	dir := filepath.Join(sys, "devices", path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(numa+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sys, "bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("../../../devices", path), filepath.Join(sys, "bus/pci/devices", busID)); err != nil {
		t.Fatal(err)
	}
}

// TestPCITopologyKeepsWhatItRead: a GPU's PCIe root and NUMA node, once
// read from sysfs, are kept for its bus ID: later listings publish them
// as first read, without reading sysfs again.
func TestPCITopologyKeepsWhatItRead(t *testing.T) {
	sys := t.TempDir()
	const path = "pci0000:00/0000:00:01.0/0000:07:00.0"
	pciLink(t, sys, "0000:07:00.0", path, "0")
	m := WithPCITopology(listedGPUs{gpus: []gpu.GPU{{Index: 0, PCIBusID: "0000:07:00.0"}}}, sys)
	place := func() string {
		t.Helper()
		gpus, err := m.GPUs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		d := slices.GPUDevice(gpus[0])
		return attrText(d, slices.AttrPCIeRoot) + " numa " + attrText(d, slices.AttrNUMANode)
	}
	if got, want := place(), "pci0000:00 numa 0"; got != want {
		t.Fatalf("first listing: GPU 0 at %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(sys, "devices", path, "numa_node"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := place(), "pci0000:00 numa 0"; got != want {
		t.Errorf("second listing, sysfs changed since: GPU 0 at %q, want %q (what the first read kept)", got, want)
	}
}

// TestPCITopologyPassesTheListingError: the wrapped manager's listing
// error (GPUs NVML counts but cannot read) comes back with the GPUs it
// read, their places filled in: the agent reports the unreadable GPUs
// rather than taking the listing for the node's every GPU.
func TestPCITopologyPassesTheListingError(t *testing.T) {
	sys := t.TempDir()
	pciLink(t, sys, "0000:07:00.0", "pci0000:00/0000:00:01.0/0000:07:00.0", "0")
	lost := &gpu.UnreadableGPUsError{Errors: map[int]error{1: errors.New("GPU is lost")}}
	m := WithPCITopology(failingGPUs{listedGPUs: listedGPUs{gpus: []gpu.GPU{{Index: 0, PCIBusID: "0000:07:00.0"}}}, err: lost}, sys)
	gpus, err := m.GPUs(t.Context())
	if !errors.Is(err, lost) {
		t.Errorf("listing error %v, want the wrapped manager's: %v", err, lost)
	}
	var roots []string
	for _, g := range gpus {
		roots = append(roots, g.PCIeRoot)
	}
	if diff := cmp.Diff([]string{"pci0000:00"}, roots); diff != "" {
		t.Errorf("PCIe roots of the GPUs listed (-want +got):\n%s", diff)
	}
}
