package agent

import (
	"context"
	"sync"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// WithPCITopology is m with each GPU's place in the host's PCI topology
// filled in from sysfs under sysfsRoot (the host's /sys, which a privileged
// container sees as its own), read with package deviceattribute and
// published as the standard attributes NVIDIA's DRA driver publishes too, so
// that a claim's matchAttribute keeps devices of several drivers together:
//   - PCIeRoot, the root complex of /sys/bus/pci/devices/<PCI bus ID>'s
//     target (resource.kubernetes.io/pcieRoot, "pci0000:00"): a GPU and a
//     NIC under one root;
//   - NUMANode, its numa_node (resource.kubernetes.io/numaNode, scalar
//     form): a GPU beside the CPUs and memory of its NUMA node; nil where
//     sysfs gives -1 (no affinity).
//
// What is read is kept for the bus ID; what cannot be read (no such device
// in sysfs, a bus ID NVML gave in another form) is left out, logged once,
// and read again at the next listing.
func WithPCITopology(m gpu.Manager, sysfsRoot string) gpu.Manager {
	return &pciTopology{Manager: m, sysfsRoot: sysfsRoot, read: map[string]pciPlace{}, logged: map[string]bool{}}
}

// pciPlace is what sysfs shows of one PCI device.
type pciPlace struct {
	root string
	numa *int
}

type pciTopology struct {
	gpu.Manager
	sysfsRoot string

	mu     sync.Mutex
	read   map[string]pciPlace // PCI bus ID -> what was read
	logged map[string]bool     // bus IDs whose root could not be read, logged
}

// GPUs is the wrapped GPUs with PCIeRoot and NUMANode set.
func (p *pciTopology) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	gpus, err := p.Manager.GPUs(ctx)
	for i := range gpus {
		place := p.place(ctx, gpus[i].PCIBusID)
		gpus[i].PCIeRoot = place.root
		if place.numa != nil {
			gpus[i].NUMANode = ptr.To(*place.numa)
		}
	}
	return gpus, err
}

func (p *pciTopology) place(ctx context.Context, busID string) pciPlace {
	if busID == "" {
		return pciPlace{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if place, ok := p.read[busID]; ok {
		return place
	}
	fs := deviceattribute.WithFSFromRoot(p.sysfsRoot)
	attr, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, fs)
	if err != nil || attr.Value.StringValue == nil {
		if !p.logged[busID] {
			p.logged[busID] = true
			klog.FromContext(ctx).Info("The GPU's place in the PCI topology is not known; its devices carry no resource.kubernetes.io/pcieRoot or numaNode", "pciBusID", busID, "err", err)
		}
		return pciPlace{}
	}
	place := pciPlace{root: *attr.Value.StringValue}
	// No NUMA affinity (numa_node -1) is an error here, and no attribute.
	if numa, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(busID, deviceattribute.ScalarAttribute, fs); err == nil && numa.Value.IntValue != nil {
		place.numa = ptr.To(int(*numa.Value.IntValue))
	}
	p.read[busID] = place
	return place
}
