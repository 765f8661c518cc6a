package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// reprepare handles a claim already in the checkpoint (a retry, or the
// kubelet asking again after a restart): its devices must still exist with
// the UUIDs recorded, and the CDI spec is written again.
// A device that does not exist, a whole GPU that exists with another UUID
// or a MIG device on a GPU of another UUID (another board: PreparedDevice.
// GPUUUID) gives ErrDeviceGone (whatever the others); else a MIG device that
// exists with another UUID gives errRecreated (the caller prepares the
// claim afresh).
// The GPU lock is not needed: prepared devices are never destroyed.
func (p *Plugin) reprepare(ctx context.Context, pc PreparedClaim) error {
	return p.reprepareIf(ctx, pc, false)
}

// reprepareIf is reprepare; with onlyIfCurrent, the CDI spec is written
// only while the claim's record is still pc, else errSuperseded (the
// kubelet, which calls the plugin beside the agent's RefreshRecreated and
// orphan sweep, may have unprepared it, or prepared it anew, since pc was
// read).
func (p *Plugin) reprepareIf(ctx context.Context, pc PreparedClaim, onlyIfCurrent bool) error {
	inv, err := p.readInventory(ctx, pc.gpuIndexes())
	if err != nil {
		return err
	}
	return p.reprepareWith(pc, inv, onlyIfCurrent)
}

// gpuIndexes are the NVML indexes of the GPUs pc's devices lie on, each
// once.
func (pc PreparedClaim) gpuIndexes() []int {
	var idxs []int
	for _, d := range pc.Devices {
		if !slices.Contains(idxs, d.GPUIndex) {
			idxs = append(idxs, d.GPUIndex)
		}
	}
	return idxs
}

// reprepareWith is reprepareIf on inv, the GPUs of pc's devices as read
// from NVML.
func (p *Plugin) reprepareWith(pc PreparedClaim, inv migslices.Inventory, onlyIfCurrent bool) error {
	// Every device is looked at before deciding: one gone is ErrDeviceGone
	// (the preparation stays, its devices protected) even where another
	// was created again already, so the outcome does not depend on the
	// allocation's order.
	var recreated error
	for _, d := range pc.Devices {
		src, ok := inv.Lookup(d.Device)
		if !ok {
			return fmt.Errorf("device %s (prepared as %s): %w on node %s now (present: %s)",
				d.Device, d.UUID, ErrDeviceGone, p.cfg.NodeName, presentDevices(inv, d.Device))
		}
		uuid := src.GPU.UUID
		if src.MIG != nil {
			uuid = src.MIG.UUID
		}
		if src.MIG == nil && uuid != d.UUID {
			// A whole GPU's UUID is the board's: another board answers to
			// the name (NVML numbered the GPUs anew, one being gone), not
			// the one the claim was allocated.
			return fmt.Errorf("device %s (prepared as %s) is GPU %s now, another board: %w on node %s",
				d.Device, d.UUID, uuid, ErrDeviceGone, p.cfg.NodeName)
		}
		if src.MIG != nil && d.GPUUUID != "" && src.GPU.UUID != d.GPUUUID {
			// The same, for a MIG device made again on the GPU now at
			// the index: its parentUUID, PCI bus ID and PCIe root are not
			// those the allocation matched.
			return fmt.Errorf("device %s (prepared on GPU %s) lies on GPU %s now, another board: %w on node %s",
				d.Device, d.GPUUUID, src.GPU.UUID, ErrDeviceGone, p.cfg.NodeName)
		}
		if uuid != d.UUID && recreated == nil {
			recreated = fmt.Errorf("device %s (prepared as %s) is %s now: %w", d.Device, d.UUID, uuid, errRecreated)
		}
		// The GPU's device minor is the driver's probe order, not the
		// board's: after a reboot with a GPU removed, the same board at the
		// same index may be /dev/nvidia<another minor>, and the recorded
		// node another GPU's.
		if node := gpuDeviceNode(src.GPU.Minor); len(d.DeviceNodes) > 0 && !slices.Contains(d.DeviceNodes, node) && recreated == nil {
			recreated = fmt.Errorf("device %s (prepared with device nodes %v) is on %s now: %w", d.Device, d.DeviceNodes, node, errRecreated)
		}
	}
	if recreated != nil {
		return recreated
	}
	// /dev is a tmpfs: after a reboot the nodes a container restarting
	// now needs may be missing.
	for _, d := range pc.Devices {
		src, _ := inv.Lookup(d.Device)
		if err := p.ensureDeviceNodes(src, d.DeviceNodes); err != nil {
			return err
		}
	}
	// The spec is written again unless the one on disk is what it would
	// be: after a reboot it is gone (/var/run is a tmpfs), and one an older
	// version wrote may name its CDI devices otherwise (requestCDIName)
	// than the IDs this answer gives the kubelet.
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.claims[pc.UID]; onlyIfCurrent && (!ok || !equality.Semantic.DeepEqual(cur, pc)) {
		return errSuperseded
	}
	if p.specOnDisk(pc) {
		return nil
	}
	return p.writeSpec(pc)
}

// specOnDisk reports whether the CDI spec file of pc holds exactly the spec
// buildSpec makes of it (false where it is missing or unreadable).
func (p *Plugin) specOnDisk(pc PreparedClaim) bool {
	want, err := buildSpec(p.cfg.DriverName, p.controlNodes(), pc, p.hostPathOf)
	if err != nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join(p.cfg.CDIDir, specName(p.cfg.DriverName, pc.UID)))
	if err != nil {
		return false
	}
	var got cdispec.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		return false
	}
	return reflect.DeepEqual(*want, got)
}

// controlNodes are the control device nodes the CDI specs name for every
// container of a claim: the required ones, and the optional ones the host has
// under Config.DevRoot (all of them without a DevRoot: simulated GPUs). A node
// that appears later (nvidia-uvm-tools made after the agent started) is in
// the spec written at the claim's next prepare, as specOnDisk then differs.
func (p *Plugin) controlNodes() []string {
	out := slices.Clone(requiredControlNodes)
	for _, n := range optionalControlNodes {
		if p.cfg.DevRoot != "" {
			if _, found, _ := p.nodeDirs().locate(n); !found {
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// nodeDirs are the directories of Config.DevRoot and DriverDevRoot.
func (p *Plugin) nodeDirs() nodeDirs {
	return nodeDirs{dev: p.cfg.DevRoot, driverDev: p.cfg.DriverDevRoot, hostDriverDev: p.cfg.HostDriverDevRoot}
}

// hostPathOf is the host path a CDI spec gives device node path (CDI
// hostPath; "": path itself): its path in the driver's device directory
// on the host where that directory has it (nodeDirs.locate). Without a
// DevRoot (simulated GPUs), "".
func (p *Plugin) hostPathOf(path string) string {
	if p.cfg.DevRoot == "" {
		return ""
	}
	h, _, _ := p.nodeDirs().locate(path)
	return h
}

// ensureDeviceNodes is the package's ensureDeviceNodes under Config.DevRoot,
// nothing without one; one call at a time (nodesMu).
func (p *Plugin) ensureDeviceNodes(src migslices.Source, nodes []string) error {
	if p.cfg.DevRoot == "" {
		return nil
	}
	p.nodesMu.Lock()
	defer p.nodesMu.Unlock()
	return ensureDeviceNodes(p.nodeDirs(), p.cfg.HostRoot, src, nodes)
}

// readInventory reads the given GPUs, and the MIG devices of those with MIG
// mode on, from NVML; it fails if one of them cannot be read, not for
// another GPU of the node that cannot.
func (p *Plugin) readInventory(ctx context.Context, gpuIndexes []int) (migslices.Inventory, error) {
	return p.readGPUs(ctx, gpuIndexes).inventory(gpuIndexes)
}

// gpuReading is one read of the node's GPUs from NVML, with the MIG devices
// of those read for (readGPUs), for the inventories of several claims.
type gpuReading struct {
	// listErr is the error of listing the GPUs as a whole; nothing else
	// is set with it.
	listErr error
	// gpus are the GPUs NVML lists, by index.
	gpus map[int]gpu.GPU
	// errs are the errors of the GPUs that could not be read, and of
	// those whose MIG devices could not be listed, by index.
	errs map[int]error
	// migs are the MIG devices of each GPU read for that is in MIG mode.
	migs map[int][]gpu.MIGDevice
}

// readGPUs lists the node's GPUs and the MIG devices of those of
// gpuIndexes with MIG mode on, each once.
func (p *Plugin) readGPUs(ctx context.Context, gpuIndexes []int) gpuReading {
	all, err := p.cfg.GPUs.GPUs(ctx)
	perGPU, ok := gpu.GPUErrors(err)
	if !ok {
		return gpuReading{listErr: fmt.Errorf("listing GPUs: %w", err)}
	}
	r := gpuReading{gpus: map[int]gpu.GPU{}, errs: map[int]error{}, migs: map[int][]gpu.MIGDevice{}}
	// A GPU fallen off the bus, or that NVML failed to read, fails only
	// the claims with devices on it.
	for idx, err := range perGPU {
		r.errs[idx] = fmt.Errorf("reading GPU %d: %w", idx, err)
	}
	for _, g := range all {
		r.gpus[g.Index] = g
		if !slices.Contains(gpuIndexes, g.Index) || !g.MIGMode.Current || r.errs[g.Index] != nil {
			continue
		}
		migs, err := p.cfg.GPUs.MIGDevices(ctx, g.Index)
		if err != nil {
			r.errs[g.Index] = fmt.Errorf("listing MIG devices of GPU %d: %w", g.Index, err)
			continue
		}
		r.migs[g.Index] = migs
	}
	return r
}

// inventory is the part of r on the given GPUs (read for by readGPUs); it
// fails if one of them could not be read. A GPU NVML does not list is not
// in it.
func (r gpuReading) inventory(gpuIndexes []int) (migslices.Inventory, error) {
	if r.listErr != nil {
		return migslices.Inventory{}, r.listErr
	}
	inv := migslices.Inventory{MIGs: map[int][]gpu.MIGDevice{}}
	for _, idx := range slices.Sorted(slices.Values(gpuIndexes)) {
		if err := r.errs[idx]; err != nil {
			return migslices.Inventory{}, err
		}
		g, ok := r.gpus[idx]
		if !ok || slices.ContainsFunc(inv.GPUs, func(h gpu.GPU) bool { return h.Index == idx }) {
			continue
		}
		inv.GPUs = append(inv.GPUs, g)
		if migs, ok := r.migs[idx]; ok {
			inv.MIGs[idx] = migs
		}
	}
	return inv, nil
}

// presentDevices lists the devices on the GPU of the named device, for error
// messages.
func presentDevices(inv migslices.Inventory, device string) string {
	idx, _, _ := migslices.DeviceGPUIndex(device)
	var names []string
	for _, s := range inv.Sources() {
		if s.GPU.Index == idx {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("nothing on GPU %d", idx)
	}
	return strings.Join(names, ", ")
}
