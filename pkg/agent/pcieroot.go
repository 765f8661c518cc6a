package agent

import (
	"context"
	"sync"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// WithPCIeRoots is m with each GPU's PCIeRoot filled in from sysfs under
// sysfsRoot (the host's /sys, which a privileged container sees as its own):
// the root complex of /sys/bus/pci/devices/<PCI bus ID>'s target, read by
// deviceattribute.GetPCIeRootAttributeByPCIBusID, and published as the
// standard attribute resource.kubernetes.io/pcieRoot, so that a claim's
// matchAttribute keeps a GPU and a NIC under one root as with NVIDIA's DRA
// driver. A root read is kept for the bus ID; one that cannot be read (no
// such device in sysfs, a bus ID NVML gave in another form) leaves PCIeRoot
// empty, is logged once, and is read again at the next listing.
func WithPCIeRoots(m gpu.Manager, sysfsRoot string) gpu.Manager {
	return &pcieRoots{Manager: m, sysfsRoot: sysfsRoot, roots: map[string]string{}, logged: map[string]bool{}}
}

type pcieRoots struct {
	gpu.Manager
	sysfsRoot string

	mu     sync.Mutex
	roots  map[string]string // PCI bus ID -> root read
	logged map[string]bool   // bus IDs whose root could not be read, logged
}

// GPUs is the wrapped GPUs with PCIeRoot set.
func (p *pcieRoots) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	gpus, err := p.Manager.GPUs(ctx)
	for i := range gpus {
		gpus[i].PCIeRoot = p.root(ctx, gpus[i].PCIBusID)
	}
	return gpus, err
}

func (p *pcieRoots) root(ctx context.Context, busID string) string {
	if busID == "" {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.roots[busID]; ok {
		return r
	}
	attr, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, deviceattribute.WithFSFromRoot(p.sysfsRoot))
	if err != nil || attr.Value.StringValue == nil {
		if !p.logged[busID] {
			p.logged[busID] = true
			klog.FromContext(ctx).Info("PCIe root complex of the GPU not known; its devices carry no resource.kubernetes.io/pcieRoot", "pciBusID", busID, "err", err)
		}
		return ""
	}
	p.roots[busID] = *attr.Value.StringValue
	return p.roots[busID]
}
