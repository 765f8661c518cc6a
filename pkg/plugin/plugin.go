// Package plugin is miglayout's DRA kubelet plugin: the kubelet calls it,
// through the kubeletplugin helper (k8s.io/dynamic-resource-allocation/
// kubeletplugin), to prepare the devices the scheduler allocated to a
// ResourceClaim before a pod's containers start, and to unprepare them after.
//
// Prepare checks that every device of this driver in the claim's allocation
// exists in NVML now (a layout change may have destroyed it since the
// scheduler saw it) and that its GPU is not being reconfigured (the per-GPU
// lock of package gpulock, shared with the agent's repartitioner), then
// writes one CDI spec per claim (tags.cncf.io/container-device-interface)
// with NVIDIA_VISIBLE_DEVICES and the device nodes of each device, and
// returns the CDI device IDs. Prepared claims are kept in a versioned,
// checksummed checkpoint file, so prepare and unprepare are idempotent and
// survive a restart of the plugin, and the agent can ask PreparedDevices
// which devices must never be destroyed.
package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hashicorp/go-multierror"
	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// Defaults of Config.
const (
	DefaultCDIDir    = "/var/run/cdi"
	DefaultHostRoot  = "/"
	DefaultPluginDir = "/var/lib/kubelet/plugins"
)

// ErrDeviceGone is wrapped by the error for a claim whose device does not
// exist (any more) on the node.
var ErrDeviceGone = errors.New("device does not exist")

// ErrUnsupportedConfig is wrapped by the error for a claim whose allocation
// carries opaque configuration parameters for this driver, which takes none.
var ErrUnsupportedConfig = errors.New("unsupported device configuration")

// errRecreated: a prepared device exists under its name with another UUID
// (created again since it was prepared).
var errRecreated = errors.New("device created again since it was prepared")

// ErrAlreadyPrepared is wrapped by the error for a device already prepared
// for another claim (neither with admin access).
var ErrAlreadyPrepared = errors.New("device already prepared for another claim")

// Config configures New.
type Config struct {
	// DriverName is the DRA driver name; default slices.DefaultDriverName.
	DriverName string
	// NodeName is the node, which is also the name of the driver's pool on
	// it. Required.
	NodeName string
	// GPUs is the GPU manager (NVML). Required.
	GPUs gpu.Manager
	// Locks are the per-GPU locks shared with the repartitioner; nil means a
	// private set (nothing else can then mark a GPU as reconfiguring).
	Locks *gpulock.Locks
	// CDIDir is where the CDI specs are written; default DefaultCDIDir.
	CDIDir string
	// CheckpointDir holds CheckpointFile; default
	// DefaultPluginDir/<driver name>, the helper's plugin data directory.
	CheckpointDir string
	// HostRoot is where the host's / is seen by the plugin, for
	// /proc/driver/nvidia/capabilities; default DefaultHostRoot. Device node
	// paths in the CDI specs are host paths and do not carry it.
	HostRoot string
	// DevRoot is where the host's /dev is seen by the plugin (the agent
	// mounts it at /dev): before a claim's CDI spec is handed out, the device
	// nodes it names must exist there, and the /dev/nvidia-caps nodes of its
	// MIG devices are created where missing (ensureDeviceNodes). Empty: no
	// device node is checked or created (simulated GPUs).
	DevRoot string
	// OnFatalError, when set, is called for background errors that the
	// helper reports as not recoverable (HandleError); the agent cancels its
	// context there. Recoverable errors are only logged.
	OnFatalError func(error)
	// OnDroppedFields, when set, is called when the helper's ResourceSlice
	// controller reports that the API server stored a slice without some
	// fields it was given (a DRA feature the cluster has off), with the
	// controller's report.
	OnDroppedFields func(*resourceslice.DroppedFieldsError)
	// OnUnprepared, when set, is called after an UnprepareResourceClaims
	// call that released the devices of at least one prepared claim, and
	// after a prepare that dropped a claim's stale preparation (the claim
	// was allocated other devices), once the checkpoint no longer holds
	// them (PreparedDevices lacks them), with no lock held: the agent wakes its repartitioner, since a GPU may have
	// waited for those devices alone. It must not block.
	OnUnprepared func()
}

// Plugin implements kubeletplugin.DRAPlugin.
type Plugin struct {
	cfg            Config
	cdi            *cdiapi.Cache
	checkpointPath string

	// mu guards claims (the checkpoint's contents in memory) and the files.
	// The helper serialises prepare and unprepare; PreparedDevices runs
	// concurrently from the agent.
	mu     sync.Mutex
	claims map[types.UID]PreparedClaim
}

var _ kubeletplugin.DRAPlugin = (*Plugin)(nil)

// New checks cfg, creates the CDI and checkpoint directories and loads the
// checkpoint (a corrupt one or one of another version is an error: the
// plugin must not forget what it prepared).
func New(cfg Config) (*Plugin, error) {
	if cfg.DriverName == "" {
		cfg.DriverName = migslices.DefaultDriverName
	}
	if err := migslices.ValidateDriverName(cfg.DriverName); err != nil {
		return nil, fmt.Errorf("creating kubelet plugin: %w", err)
	}
	if cfg.NodeName == "" {
		return nil, errors.New("creating kubelet plugin: node name is required")
	}
	if cfg.GPUs == nil {
		return nil, errors.New("creating kubelet plugin: GPU manager is required")
	}
	if cfg.Locks == nil {
		cfg.Locks = gpulock.New()
	}
	if cfg.CDIDir == "" {
		cfg.CDIDir = DefaultCDIDir
	}
	if cfg.CheckpointDir == "" {
		cfg.CheckpointDir = filepath.Join(DefaultPluginDir, cfg.DriverName)
	}
	if cfg.HostRoot == "" {
		cfg.HostRoot = DefaultHostRoot
	}
	for _, dir := range []string{cfg.CDIDir, cfg.CheckpointDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating kubelet plugin: %w", err)
		}
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cfg.CDIDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("creating kubelet plugin: creating CDI cache: %w", err)
	}
	p := &Plugin{cfg: cfg, cdi: cache, checkpointPath: filepath.Join(cfg.CheckpointDir, CheckpointFile)}
	if p.claims, err = readCheckpoint(p.checkpointPath); err != nil {
		return nil, fmt.Errorf("creating kubelet plugin: %w; %s", err, unreadableCheckpointHelp(p.checkpointPath))
	}
	return p, nil
}

// RestoreSpecs writes again the CDI spec of each checkpointed claim whose
// spec file is missing (the CDI directory cleaned,
// e.g. a tmpfs /var/run/cdi emptied by the host's temporary-file cleanup,
// without a reboot: the kubelet does not prepare the claim again, and a
// container of its pod that restarts would fail on an unresolvable CDI
// device), where its devices still exist with the UUIDs recorded (as a
// repeated prepare checks them). Call it once after New, before Start. A
// claim it cannot restore is left to RefreshRecreated, which writes every
// missing spec again too (the agent calls it in its first pass, until it
// succeeds; the kubelet does not prepare again a claim its checkpoint
// holds prepared); the errors, by claim, are returned.
func (p *Plugin) RestoreSpecs(ctx context.Context) map[types.UID]error {
	failed := map[types.UID]error{}
	uids := make([]types.UID, 0, len(p.claims))
	for uid := range p.claims {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		pc := p.claims[uid]
		if len(pc.Devices) == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(p.cfg.CDIDir, specName(p.cfg.DriverName, pc.UID))); !errors.Is(err, fs.ErrNotExist) {
			// There (or unreadable): a spec an older version wrote
			// names its CDI devices as the kubelet still has them for
			// running pods; the kubelet's next prepare rewrites it.
			continue
		}
		if err := p.reprepare(ctx, pc); err != nil {
			failed[uid] = fmt.Errorf("restoring the CDI spec of claim %s/%s: %w", pc.Namespace, pc.Name, err)
		}
	}
	return failed
}

// RemoveStaleSpecs removes the CDI spec files this driver wrote
// (k8s.<driver>-claim_<claim UID>.json in the CDI directory) of claims the
// checkpoint does not hold prepared, and checkpoint temporary files
// (checkpointTemps) a crash left in the checkpoint directory. A
// prepare writes the spec before the checkpoint and an unprepare removes
// it first, so such a spec is one of a prepare that never succeeded (the
// agent stopped between the two writes, and the kubelet did not prepare
// again, e.g. the pod was deleted meanwhile): no container was given its
// devices, and the kubelet prepares again any claim it still needs,
// writing the spec again. Left, these files pile up over a node's life,
// and the container runtime reads them all each time it refreshes its CDI
// registry. Other vendors' and classes' files are not touched. Call it once
// after New, before Start (nothing is prepared concurrently). It returns
// the paths removed and the errors of those it could not remove or list.
func (p *Plugin) RemoveStaleSpecs() ([]string, error) {
	var removed []string
	var errs error
	prefix := cdiapi.GenerateTransientSpecName(cdiVendor(p.cfg.DriverName), CDIClass, "")
	entries, err := os.ReadDir(p.cfg.CDIDir)
	if err != nil {
		errs = multierror.Append(errs, fmt.Errorf("listing CDI specs: %w", err))
	}
	for _, e := range entries {
		uid, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		uid, ok = strings.CutSuffix(uid, ".json")
		if !ok || uid == "" {
			continue
		}
		if _, held := p.claims[types.UID(uid)]; held {
			continue
		}
		if err := p.cdi.RemoveSpec(e.Name()); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("removing stale CDI spec: %w", err))
			continue
		}
		removed = append(removed, filepath.Join(p.cfg.CDIDir, e.Name()))
	}
	temps, err := filepath.Glob(filepath.Join(p.cfg.CheckpointDir, checkpointTemps))
	if err != nil {
		errs = multierror.Append(errs, fmt.Errorf("listing checkpoint temporary files: %w", err))
	}
	for _, path := range temps {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = multierror.Append(errs, fmt.Errorf("removing checkpoint temporary file: %w", err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, errs
}

// helperLinger is how long the kubelet plugin helper runs on after the
// context Start was given ends, unless stopped before: longer than the
// agent's republication of a pass its stop cut short (10 s).
var helperLinger = 15 * time.Second

// DriverName returns the driver name the plugin serves.
func (p *Plugin) DriverName() string { return p.cfg.DriverName }

// Start runs the kubeletplugin helper for p: the registration socket the
// kubelet watches, the DRA gRPC service that calls p, and, once
// Helper.PublishResources is called, the ResourceSlice controller for the
// node's pool (owned by the Node). opts come after the driver name, node
// name and client and may override them (e.g. RegistrarDirectoryPath,
// PluginDataDirectoryPath, which must then equal Config.CheckpointDir's
// parent layout as the deployment chooses).
// The helper runs until Helper.Stop, or helperLinger after ctx ends (ctx
// values, such as the logger, are kept).
func (p *Plugin) Start(ctx context.Context, client kubernetes.Interface, opts ...kubeletplugin.Option) (*kubeletplugin.Helper, error) {
	all := append([]kubeletplugin.Option{
		kubeletplugin.DriverName(p.cfg.DriverName),
		kubeletplugin.NodeName(p.cfg.NodeName),
		kubeletplugin.KubeClient(client),
	}, opts...)
	// The helper outlives ctx: a pass the agent's stop cuts short
	// republishes the pool through it after ctx ends. By helperLinger at
	// most, so that a publication that hangs cannot hold the stop longer.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	stopLinger := context.AfterFunc(ctx, func() { time.AfterFunc(helperLinger, hcancel) })
	h, err := kubeletplugin.Start(hctx, p, all...)
	if err != nil {
		stopLinger()
		hcancel()
		return nil, fmt.Errorf("starting kubelet plugin helper: %w", err)
	}
	return h, nil
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin. Each claim gets
// its own result; one claim's failure does not fail the others.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devs, err := p.prepareClaim(ctx, claim)
		if err != nil {
			logger.Error(err, "Preparing claim failed", "claim", klog.KObj(claim))
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		logger.V(2).Info("Prepared claim", "claim", klog.KObj(claim), "devices", len(devs))
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devs}
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
	busy, err := p.running(ctx, p.onReadableGPUs(ctx, exclusive(prepared)))
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
	next := maps(p.claims)
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
	want, err := buildSpec(p.cfg.DriverName, p.controlNodes(), pc)
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
			if _, err := os.Stat(hostDevPath(p.cfg.DevRoot, n)); err != nil {
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// ensureDeviceNodes is the package's ensureDeviceNodes under Config.DevRoot,
// nothing without one.
func (p *Plugin) ensureDeviceNodes(src migslices.Source, nodes []string) error {
	if p.cfg.DevRoot == "" {
		return nil
	}
	return ensureDeviceNodes(p.cfg.DevRoot, p.cfg.HostRoot, src, nodes)
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

// checkExclusive fails when a device of pc is prepared for another claim,
// unless one of the two has admin access; p.mu is held.
func (p *Plugin) checkExclusive(pc PreparedClaim) error {
	for _, d := range pc.Devices {
		for uid, other := range p.claims {
			if uid == pc.UID {
				continue
			}
			for _, od := range other.Devices {
				if od.Device == d.Device && !d.AdminAccess && !od.AdminAccess {
					return fmt.Errorf("device %s: %w %s/%s (%s)", d.Device, ErrAlreadyPrepared, other.Namespace, other.Name, uid)
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
	spec, err := buildSpec(p.cfg.DriverName, p.controlNodes(), pc)
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

func maps(in map[types.UID]PreparedClaim) map[types.UID]PreparedClaim {
	out := make(map[types.UID]PreparedClaim, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: it removes the
// claim's CDI spec, then its checkpoint entry (in this order, so that a crash
// in between leaves the devices recorded as prepared, which is the safe
// side). A claim that is not prepared is no error.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]error, len(claims))
	released := false
	p.mu.Lock()
	for _, c := range claims {
		was := p.claims[c.UID]
		err := p.unprepareClaim(ctx, c)
		if err != nil {
			logger.Error(err, "Unpreparing claim failed", "claim", c)
		} else {
			logger.V(2).Info("Unprepared claim", "claim", c)
			released = released || len(was.Devices) > 0
		}
		out[c.UID] = err
	}
	p.mu.Unlock()
	p.unprepared(released)
	return out, nil
}

// unprepared calls Config.OnUnprepared where released; p.mu is not held.
func (p *Plugin) unprepared(released bool) {
	if released && p.cfg.OnUnprepared != nil {
		p.cfg.OnUnprepared()
	}
}

// unprepareClaim; p.mu is held.
func (p *Plugin) unprepareClaim(ctx context.Context, c kubeletplugin.NamespacedObject) error {
	if err := p.cdi.RemoveSpec(specName(p.cfg.DriverName, c.UID)); err != nil {
		return fmt.Errorf("unpreparing claim %s: removing CDI spec: %w", c, err)
	}
	if _, ok := p.claims[c.UID]; !ok {
		return nil
	}
	next := maps(p.claims)
	delete(next, c.UID)
	if err := writeCheckpoint(p.checkpointPath, next); err != nil {
		if !errors.Is(err, errNotDurable) {
			return fmt.Errorf("unpreparing claim %s: %w", c, err)
		}
		// The file no longer holds the claim: memory follows it. After a
		// power loss the claim may come back from the file, its devices
		// counted as prepared until it is unprepared again.
		klog.FromContext(ctx).Error(err, "Checkpoint written, but a power loss may undo it", "claim", c)
	}
	p.claims = next
	return nil
}

// HandleError implements kubeletplugin.DRAPlugin: background errors (e.g.
// publishing ResourceSlices) are logged; fields the API server dropped are
// passed to Config.OnDroppedFields, errors the helper marks as not
// recoverable to Config.OnFatalError.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	var dropped *resourceslice.DroppedFieldsError
	if errors.As(err, &dropped) && p.cfg.OnDroppedFields != nil {
		p.cfg.OnDroppedFields(dropped)
	}
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && p.cfg.OnFatalError != nil {
		p.cfg.OnFatalError(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: device health is not
// reported (yet).
func (p *Plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// PreparedClaims returns the prepared claims, ordered by namespace, name and
// UID.
func (p *Plugin) PreparedClaims() []PreparedClaim {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PreparedClaim, 0, len(p.claims))
	for _, c := range p.claims {
		c.Devices = slices.Clone(c.Devices)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
	return out
}

// PreparedDevices returns, per device name in this node's pool, the claims
// it is prepared for: the devices that the agent must never destroy.
func (p *Plugin) PreparedDevices() map[string][]types.NamespacedName {
	out := map[string][]types.NamespacedName{}
	for _, c := range p.PreparedClaims() {
		for _, d := range c.Devices {
			out[d.Device] = append(out[d.Device], types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
		}
	}
	return out
}
