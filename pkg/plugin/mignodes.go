package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/hashicorp/go-multierror"
)

// migManagementCapabilities are the NVIDIA driver's capability files, under
// <host root>/proc/driver/nvidia/capabilities, of the two MIG management
// capabilities: config (nvidia-cap1 on current drivers: create and destroy
// GPU and compute instances, change MIG mode) and monitor (nvidia-cap2: read
// every instance). NVIDIA's MIG User Guide, "Device Nodes and
// Capabilities".
var migManagementCapabilities = []string{"mig/config", "mig/monitor"}

// EnsureMIGManagementNodes makes the /dev/nvidia-caps nodes of the MIG
// config and monitor capabilities under devRoot (where the host's /dev is
// seen) where missing, from the capability files under hostRoot, as
// nvidia-modprobe -f does (ensureCapabilityNode; left to the host where the
// driver says so, DeviceFileModify: 0). NVML opens them for MIG management,
// and a host where nothing ran nvidia-smi's MIG commands since boot may not
// have them; making them here does not depend on nvidia-modprobe, which the
// agent's distroless image lacks, being there to make them.
//
// It returns the host paths of the nodes that exist now. A capability file
// that does not exist (a driver older than MIG, or /proc/driver/nvidia not
// mounted under hostRoot) is reported in missing, not as an error; errors
// (a malformed file, no nvidia-caps major, a failed mknod, a node the host
// keeps that is missing) are collected for both capabilities.
func EnsureMIGManagementNodes(devRoot, hostRoot string) (nodes, missing []string, err error) {
	var errs *multierror.Error
	for _, name := range migManagementCapabilities {
		path := filepath.Join(hostRoot, "proc/driver/nvidia/capabilities", name)
		c, rerr := readCapability(path)
		if errors.Is(rerr, fs.ErrNotExist) {
			missing = append(missing, path)
			continue
		}
		if rerr != nil {
			errs = multierror.Append(errs, fmt.Errorf("reading MIG capability %s: %w", name, rerr))
			continue
		}
		if eerr := ensureCapabilityNode(devRoot, hostRoot, c); eerr != nil {
			errs = multierror.Append(errs, fmt.Errorf("creating the device node of MIG capability %s: %w", name, eerr))
			continue
		}
		nodes = append(nodes, capabilityNode(c.minor))
	}
	return nodes, missing, errs.ErrorOrNil()
}
