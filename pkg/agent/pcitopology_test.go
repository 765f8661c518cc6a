package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

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

// TestPCITopology: each GPU's PCIe root complex (the target of
// /sys/bus/pci/devices/<bus ID>, under its root directory) and NUMA node
// (its numa_node) are read from sysfs and published with its devices as
// resource.kubernetes.io/pcieRoot and numaNode; a device of no NUMA
// affinity (-1) gets no numaNode, and a GPU sysfs does not show gets
// neither, until sysfs shows it.
func TestPCITopology(t *testing.T) {
	sys := t.TempDir()
	link := func(busID, path, numa string) {
		t.Helper()
		dir := filepath.Join(sys, "devices", path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(numa+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sys, "bus/pci/devices"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../../devices", path), filepath.Join(sys, "bus/pci/devices", busID)); err != nil {
			t.Fatal(err)
		}
	}
	link("0000:07:00.0", "pci0000:00/0000:00:01.0/0000:05:00.0/0000:07:00.0", "0")
	link("0000:b7:00.0", "pci0000:b0/0000:b0:02.0/0000:b7:00.0", "-1")
	m := WithPCITopology(listedGPUs{gpus: []gpu.GPU{{Index: 0, PCIBusID: "0000:07:00.0"}, {Index: 1, PCIBusID: "0000:b7:00.0"}, {Index: 2, PCIBusID: "0000:c1:00.0"}}}, sys)
	places := func() map[int]string {
		t.Helper()
		gpus, err := m.GPUs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]string{}
		for _, g := range gpus {
			d := slices.GPUDevice(g)
			got[g.Index] = attrText(d, slices.AttrPCIeRoot) + " numa " + attrText(d, slices.AttrNUMANode)
		}
		return got
	}
	for range 2 { // the second read from what the first kept
		want := map[int]string{0: "pci0000:00 numa 0", 1: "pci0000:b0 numa none", 2: "none numa none"}
		if diff := cmp.Diff(want, places()); diff != "" {
			t.Errorf("attributes (-want +got):\n%s", diff)
		}
	}
	link("0000:c1:00.0", "pci0000:c0/0000:c0:01.0/0000:c1:00.0", "1")
	want := map[int]string{0: "pci0000:00 numa 0", 1: "pci0000:b0 numa none", 2: "pci0000:c0 numa 1"}
	if diff := cmp.Diff(want, places()); diff != "" {
		t.Errorf("attributes once sysfs shows GPU 2 (-want +got):\n%s", diff)
	}
}

// attrText is a string or int attribute of d as text, "none" where absent.
func attrText(d resourceapi.Device, name resourceapi.QualifiedName) string {
	a, ok := d.Attributes[name]
	switch {
	case !ok:
		return "none"
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	}
	return "?"
}
