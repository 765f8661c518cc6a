package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// listedGPUs is a gpu.Manager whose GPUs are fixed.
type listedGPUs struct {
	gpu.Manager
	gpus []gpu.GPU
}

func (l listedGPUs) GPUs(context.Context) ([]gpu.GPU, error) {
	return append([]gpu.GPU(nil), l.gpus...), nil
}

// TestPCIeRoots: each GPU's PCIe root complex is read from sysfs (the
// target of /sys/bus/pci/devices/<bus ID>, under its root directory) and
// published with its devices as resource.kubernetes.io/pcieRoot; a GPU
// sysfs does not show gets none, until sysfs shows it.
func TestPCIeRoots(t *testing.T) {
	sys := t.TempDir()
	link := func(busID, path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(sys, "devices", path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sys, "bus/pci/devices"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../../devices", path), filepath.Join(sys, "bus/pci/devices", busID)); err != nil {
			t.Fatal(err)
		}
	}
	link("0000:07:00.0", "pci0000:00/0000:00:01.0/0000:05:00.0/0000:07:00.0")
	link("0000:b7:00.0", "pci0000:b0/0000:b0:02.0/0000:b7:00.0")
	m := WithPCIeRoots(listedGPUs{gpus: []gpu.GPU{{Index: 0, PCIBusID: "0000:07:00.0"}, {Index: 1, PCIBusID: "0000:b7:00.0"}, {Index: 2, PCIBusID: "0000:c1:00.0"}}}, sys)
	roots := func() map[int]string {
		t.Helper()
		gpus, err := m.GPUs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]string{}
		for _, g := range gpus {
			got[g.Index] = "none"
			if a, ok := slices.GPUDevice(g).Attributes[slices.AttrPCIeRoot]; ok && a.StringValue != nil {
				got[g.Index] = *a.StringValue
			}
		}
		return got
	}
	for range 2 { // the second read from what the first kept
		if diff := cmp.Diff(map[int]string{0: "pci0000:00", 1: "pci0000:b0", 2: "none"}, roots()); diff != "" {
			t.Errorf("pcieRoot attributes (-want +got):\n%s", diff)
		}
	}
	link("0000:c1:00.0", "pci0000:c0/0000:c0:01.0/0000:c1:00.0")
	if diff := cmp.Diff(map[int]string{0: "pci0000:00", 1: "pci0000:b0", 2: "pci0000:c0"}, roots()); diff != "" {
		t.Errorf("pcieRoot attributes once sysfs shows GPU 2 (-want +got):\n%s", diff)
	}
}
