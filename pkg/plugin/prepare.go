package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// PrepareResourceClaims implements kubeletplugin.DRAPlugin. Each claim gets
// its own result; one claim's failure does not fail the others.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	prepared := false
	for _, claim := range claims {
		devs, err := p.prepareClaim(ctx, claim)
		if err != nil {
			logger.Error(err, "Preparing claim failed", "claim", klog.KObj(claim))
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		logger.V(2).Info("Prepared claim", "claim", klog.KObj(claim), "devices", len(devs))
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devs}
		prepared = true
	}
	if prepared {
		// The kubelet shows the new devices' health without waiting for
		// the next report.
		p.notifyHealth()
	}
	return out, nil
}

// staleInUse fails, wrapping ErrOrphanInUse, where claim is prepared here
// with other devices than it is allocated now (sameAllocation) and a
// compute process runs on one of those it was prepared with exclusively
// (not with admin access, whose device other claims' processes use): a
// container started under the old allocation still runs there (its pod
// force-deleted, the kubelet's record of it lost), and dropping that
// preparation would let the device be prepared for another claim while it
// runs. The kubelet retries the prepare; it succeeds once the process ends.
func (p *Plugin) staleInUse(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	p.mu.Lock()
	prepared, ok := p.claims[claim.UID]
	stale := ok && !p.sameAllocation(prepared, claim)
	p.mu.Unlock()
	if !stale {
		return nil
	}
	busy, err := p.running(ctx, exclusive(prepared))
	if err != nil {
		return fmt.Errorf("listing the processes on the devices it was prepared with: %w", err)
	}
	if len(busy) > 0 {
		return fmt.Errorf("it was prepared with other devices, and %w: %s", ErrOrphanInUse, strings.Join(busy, ", "))
	}
	return nil
}

// noConfig fails where the allocation carries opaque configuration for
// this driver (from the claim or its DeviceClass) with parameters: the
// driver takes none (sharing strategies, MPS and the like of other
// drivers' configuration are not offered), and a parameter taken silently
// would have the container run without what it asked for. Configuration of
// other drivers is theirs; an empty one (none, null, or an object of no
// field but apiVersion and kind, as a typed configuration with nothing set
// is written) asks for nothing.
func (p *Plugin) noConfig(configs []resourceapi.DeviceAllocationConfiguration) error {
	for _, c := range configs {
		o := c.Opaque
		if o == nil || o.Driver != p.cfg.DriverName || emptyParameters(o.Parameters.Raw) {
			continue
		}
		return fmt.Errorf("%w: opaque configuration for driver %s (from the %s, requests %v): this driver takes no configuration parameters; remove the config entry (the device is given as it is)",
			ErrUnsupportedConfig, o.Driver, configSource(c.Source), c.Requests)
	}
	return nil
}

// emptyParameters reports whether raw (JSON) sets nothing: absent, null,
// or an object whose only fields are apiVersion and kind.
func emptyParameters(raw []byte) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return false
	}
	delete(fields, "apiVersion")
	delete(fields, "kind")
	return len(fields) == 0
}

// configSource names where an allocation's configuration came from.
func configSource(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "DeviceClass"
	}
	return "claim"
}

// exclusive is pc with only the devices it holds without admin access.
func exclusive(pc PreparedClaim) PreparedClaim {
	pc.Devices = slices.DeleteFunc(slices.Clone(pc.Devices), func(d PreparedDevice) bool { return d.AdminAccess })
	return pc
}

// dropStale removes the preparation of claim from the checkpoint and its
// CDI spec (it no longer matches the claim's devices), so the claim is
// prepared afresh; p.mu is held.
func (p *Plugin) dropStale(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	err := p.unprepareClaim(ctx, kubeletplugin.NamespacedObject{UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}})
	if err != nil {
		return fmt.Errorf("preparing claim %s/%s: dropping its stale preparation: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func (p *Plugin) prepareClaim(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	return p.prepareClaimIf(ctx, claim, nil)
}

// errSuperseded is prepareClaimIf's answer where the claim's record is not
// the one expected (any more).
var errSuperseded = errors.New("the claim's preparation changed meanwhile")

// prepareClaimIf is prepareClaim; with expect, only while the claim's
// record is *expect, from the start to the checkpoint's write (else
// errSuperseded): a claim the kubelet unprepared (or prepared anew)
// meanwhile is not prepared again behind its back.
func (p *Plugin) prepareClaimIf(ctx context.Context, claim *resourceapi.ResourceClaim, expect *PreparedClaim) ([]kubeletplugin.Device, error) {
	ref := claim.Namespace + "/" + claim.Name
	superseded := func() bool {
		cur, ok := p.claims[claim.UID]
		return expect != nil && (!ok || !equality.Semantic.DeepEqual(cur, *expect))
	}
	if expect != nil {
		// Superseded already: the processes staleInUse would find are
		// those of the claim's new preparation, not orphans.
		p.mu.Lock()
		gone := superseded()
		p.mu.Unlock()
		if gone {
			return nil, errSuperseded
		}
	}
	if err := p.staleInUse(ctx, claim); err != nil {
		return nil, fmt.Errorf("preparing claim %s afresh: %w", ref, err)
	}
	p.mu.Lock()
	if superseded() {
		p.mu.Unlock()
		return nil, errSuperseded
	}
	prepared, ok := p.claims[claim.UID]
	if ok && !p.sameAllocation(prepared, claim) {
		// The claim was deallocated and allocated again (other devices)
		// while its unprepare never reached this plugin: the entry is
		// stale, the allocation decides.
		klog.FromContext(ctx).Info("Claim allocated other devices than prepared; preparing it afresh", "claim", klog.KObj(claim))
		if err := p.dropStale(ctx, claim); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		ok = false
		defer p.unprepared(len(prepared.Devices) > 0)
	}
	p.mu.Unlock()
	if ok {
		// Only while the record is still the one read: the agent's
		// RefreshRecreated may record the claim's recreated devices, or
		// the orphan sweep release it, while NVML is read. Superseded, the
		// kubelet's prepare fails and is retried, and then answers from
		// the record as it is.
		err := p.reprepareIf(ctx, prepared, true)
		if err == nil {
			return resultDevices(prepared), nil
		}
		if !errors.Is(err, errRecreated) {
			return nil, fmt.Errorf("preparing claim %s again: %w", ref, err)
		}
		// The allocated devices exist under their names with other UUIDs:
		// MIG devices do not survive a reboot or a GPU reset, and the
		// agent created them again, while the checkpoint (on disk) did.
		// The allocation still names them: prepare it afresh. The old
		// preparation stays until the new one replaces it (same UID: same
		// CDI spec file, same checkpoint entry), so a fresh prepare that
		// fails (the GPU still being reconfigured, the new device's
		// capability file not readable yet) leaves the devices protected.
		klog.FromContext(ctx).Info("Claim's devices were created again since it was prepared (a reboot or GPU reset); preparing it afresh", "claim", klog.KObj(claim), "detail", err)
	}
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("preparing claim %s: the claim is not allocated", ref)
	}
	if err := p.noConfig(claim.Status.Allocation.Devices.Config); err != nil {
		return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
	}
	var results []resourceapi.DeviceRequestAllocationResult
	gpus := map[int]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.cfg.DriverName {
			continue
		}
		if r.Pool != p.cfg.NodeName {
			return nil, fmt.Errorf("preparing claim %s: device %s (request %s) is allocated from pool %q, this node's pool is %q",
				ref, r.Device, r.Request, r.Pool, p.cfg.NodeName)
		}
		idx, _, ok := migslices.DeviceGPUIndex(r.Device)
		if !ok {
			return nil, fmt.Errorf("preparing claim %s: device %s (request %s): %w on node %s: not a device name this driver publishes",
				ref, r.Device, r.Request, ErrDeviceGone, p.cfg.NodeName)
		}
		gpus[idx] = true
		results = append(results, r)
	}

	// Lock the GPUs involved, in index order, failing at once for one
	// being reconfigured; the device checks and the checkpoint are done
	// under the locks, so the repartitioner sees this claim as prepared
	// before it may touch any of them.
	order := make([]int, 0, len(gpus))
	for idx := range gpus {
		order = append(order, idx)
	}
	sort.Ints(order)
	for _, idx := range order {
		unlock, err := p.cfg.Locks.LockUnlessReconfiguring(ctx, idx)
		if err != nil {
			return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
		}
		defer unlock()
	}

	inv, err := p.readInventory(ctx, order)
	if err != nil {
		return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
	}
	pc := PreparedClaim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
	for _, r := range results {
		// A device two requests share (admin access) is one device of
		// the claim, recorded once with both requests (it gets a CDI
		// device per request: requestCDIName).
		if i := slices.IndexFunc(pc.Devices, func(d PreparedDevice) bool { return d.Pool == r.Pool && d.Device == r.Device }); i >= 0 {
			d := &pc.Devices[i]
			d.Requests = append(d.Requests, r.Request)
			d.AdminAccess = d.AdminAccess && ptr.Deref(r.AdminAccess, false)
			continue
		}
		src, ok := inv.Lookup(r.Device)
		if !ok {
			return nil, fmt.Errorf("preparing claim %s: device %s (request %s): %w on node %s now (present: %s)",
				ref, r.Device, r.Request, ErrDeviceGone, p.cfg.NodeName, presentDevices(inv, r.Device))
		}
		nodes, err := ownDeviceNodes(p.cfg.HostRoot, src)
		if err != nil {
			return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
		}
		if err := p.ensureDeviceNodes(src, nodes); err != nil {
			return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
		}
		uuid, board := src.GPU.UUID, ""
		if src.MIG != nil {
			uuid, board = src.MIG.UUID, src.GPU.UUID
		}
		pc.Devices = append(pc.Devices, PreparedDevice{
			Requests:    []string{r.Request},
			Pool:        r.Pool,
			Device:      r.Device,
			AdminAccess: ptr.Deref(r.AdminAccess, false),
			GPUIndex:    src.GPU.Index,
			UUID:        uuid,
			GPUUUID:     board,
			DeviceNodes: nodes,
			CDIDeviceID: cdiDeviceID(p.cfg.DriverName, claim.UID, r.Device),
		})
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if superseded() {
		return nil, errSuperseded
	}
	if err := p.checkExclusive(pc); err != nil {
		return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
	}
	if err := p.writeSpec(pc); err != nil {
		return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
	}
	next := maps.Clone(p.claims)
	next[pc.UID] = pc
	if err := writeCheckpoint(p.checkpointPath, next); err != nil {
		if !errors.Is(err, errNotDurable) {
			// The checkpoint holds what it held: so does the CDI spec,
			// the old preparation's where there is one (its devices were
			// created again), none otherwise.
			// Where that fails too, the kubelet's retry of the prepare
			// or its unprepare writes or removes the spec.
			var undo error
			if old, ok := p.claims[pc.UID]; ok {
				undo = p.writeSpec(old)
			} else {
				undo = p.cdi.RemoveSpec(specName(p.cfg.DriverName, pc.UID))
			}
			if undo != nil {
				klog.FromContext(ctx).Error(undo, "Could not restore the claim's CDI spec after its checkpoint write failed", "claim", klog.KObj(claim))
			}
			return nil, fmt.Errorf("preparing claim %s: %w", ref, err)
		}
		klog.FromContext(ctx).Error(err, "Checkpoint written, but a power loss may undo it", "claim", klog.KObj(claim))
	}
	p.claims = next
	return resultDevices(pc), nil
}

// sameAllocation reports whether pc holds exactly the devices of this
// driver the claim's allocation names, each for the same requests and with
// the same admin access (a claim not allocated any more counts as the same:
// kubelet asks again only for a claim it prepared). Devices of the same
// names given to other requests are another allocation: the kubelet hands a
// container the devices of the requests it names, as prepare reports them.
func (p *Plugin) sameAllocation(pc PreparedClaim, claim *resourceapi.ResourceClaim) bool {
	if claim.Status.Allocation == nil {
		return true
	}
	type use struct {
		requests sets.Set[string]
		admin    bool
	}
	want := map[string]*use{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.cfg.DriverName {
			continue
		}
		key, admin := r.Pool+"/"+r.Device, ptr.Deref(r.AdminAccess, false)
		if u, ok := want[key]; ok {
			u.requests.Insert(r.Request)
			u.admin = u.admin && admin
			continue
		}
		want[key] = &use{requests: sets.New(r.Request), admin: admin}
	}
	if len(want) != len(pc.Devices) {
		return false
	}
	for _, d := range pc.Devices {
		u, ok := want[d.Pool+"/"+d.Device]
		if !ok || u.admin != d.AdminAccess || !u.requests.Equal(sets.New(d.Requests...)) {
			return false
		}
	}
	return true
}

// checkExclusive fails when a device of pc is prepared for another claim,
// unless one of the two has admin access; p.mu is held. A device is the
// same by name or by UUID: where NVML numbered the GPUs anew since the
// other claim's prepare (a GPU taken off the node without a reboot), the
// device it holds is published under another name, which the scheduler
// may allocate again.
func (p *Plugin) checkExclusive(pc PreparedClaim) error {
	for _, d := range pc.Devices {
		for uid, other := range p.claims {
			if uid == pc.UID {
				continue
			}
			for _, od := range other.Devices {
				if d.AdminAccess || od.AdminAccess {
					continue
				}
				if od.Device == d.Device {
					return fmt.Errorf("device %s: %w %s/%s (%s)", d.Device, ErrAlreadyPrepared, other.Namespace, other.Name, uid)
				}
				if od.UUID != "" && od.UUID == d.UUID {
					return fmt.Errorf("device %s (%s): %w %s/%s (%s) as device %s, its name before NVML numbered the GPUs anew",
						d.Device, d.UUID, ErrAlreadyPrepared, other.Namespace, other.Name, uid, od.Device)
				}
			}
		}
	}
	return nil
}

// writeSpec writes the CDI spec of pc (none for a claim without devices of
// this driver); p.mu is held.
func (p *Plugin) writeSpec(pc PreparedClaim) error {
	if len(pc.Devices) == 0 {
		return nil
	}
	spec, err := buildSpec(p.cfg.DriverName, p.controlNodes(), pc, p.hostPathOf)
	if err != nil {
		return err
	}
	if err := p.cdi.WriteSpec(spec, specName(p.cfg.DriverName, pc.UID)); err != nil {
		return fmt.Errorf("writing CDI spec: %w", err)
	}
	return nil
}

func resultDevices(pc PreparedClaim) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(pc.Devices))
	for _, d := range pc.Devices {
		// A device several requests share is reported once per request,
		// each with that request's CDI device (the kubelet hands a
		// container the CDI devices of the entries naming its request).
		for _, r := range parentRequests(d) {
			out = append(out, kubeletplugin.Device{
				Requests:     slices.DeleteFunc(slices.Clone(d.Requests), func(q string) bool { return resourceclaim.BaseRequestRef(q) != r }),
				PoolName:     d.Pool,
				DeviceName:   d.Device,
				CDIDeviceIDs: []string{requestCDIName(d.CDIDeviceID, d, r)},
			})
		}
	}
	return out
}
