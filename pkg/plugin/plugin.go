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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

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
	// DriverDevRoot is where the device directory of an NVIDIA driver
	// installed in a container is seen by the plugin (the GPU Operator's
	// driver makes its device nodes in /run/nvidia/driver/dev, which the
	// agent sees as /driver-root/dev), and HostDriverDevRoot that
	// directory's path on the host. A device node is looked for there
	// first, then under DevRoot (nodeDirs.locate), and the CDI spec gives
	// one found there its host path (hostPath <HostDriverDevRoot>/...):
	// the container runtime reads the device number from the host path,
	// and the host's /dev may lack the node or hold an empty file of its
	// name. Empty: nodes are looked for under DevRoot only.
	DriverDevRoot, HostDriverDevRoot string
	// OnFatalError, when set, is called for background errors that the
	// helper reports as not recoverable (HandleError); the agent cancels its
	// context there. Recoverable errors are only logged.
	OnFatalError func(error)
	// OnDroppedFields, when set, is called when the helper's ResourceSlice
	// controller reports that the API server stored a slice without some
	// fields it was given (a DRA feature the cluster has off), with the
	// controller's report.
	OnDroppedFields func(*resourceslice.DroppedFieldsError)
	// OnPublishError, when set, is called with the other errors of the
	// helper's ResourceSlice controller (sliceControllerMessages: an
	// update the API server refused, a pool that failed validation),
	// which the controller retries. It must not block.
	OnPublishError func(error)
	// OnUnprepared, when set, is called after an UnprepareResourceClaims
	// call that released the devices of at least one prepared claim, and
	// after a prepare that dropped a claim's stale preparation (the claim
	// was allocated other devices), once the checkpoint no longer holds
	// them (PreparedDevices lacks them), with no lock held: the agent wakes its repartitioner, since a GPU may have
	// waited for those devices alone. It must not block.
	OnUnprepared func()
	// HealthInterval is how often the health of the prepared devices is
	// reported to the kubelet (WatchHealthStatus); default
	// DefaultHealthInterval.
	HealthInterval time.Duration
	// Xids, when set, delivers the GPUs' Xid critical errors, which
	// WatchXids turns into Unhealthy devices (usually the *gpu.NVMLManager
	// of GPUs). Nil: a device's health comes from NVML's readings alone.
	Xids gpu.XidSource
	// OnXid, when set, is called after an Xid that is not ignored marked
	// devices (XidOf reports them; not for the same Xid again on devices
	// marked for it within xidResaveAfter), with the Xid and the devices it hit
	// ("<name> (<UUID>)", or "GPU <index> and every device on it"), with no
	// lock held: the agent wakes its repartitioner, which publishes them
	// tainted, and records an event. It must not block for long.
	OnXid func(ctx context.Context, x gpu.Xid, hit []string)
	// IgnoredXids are the Xids that leave devices Healthy; nil means
	// DefaultIgnoredXids, an empty list none.
	IgnoredXids []uint64
	// BootID is the node's boot ID (/proc/sys/kernel/random/boot_id):
	// with it, the Xid marks are kept in XidMarksFile across restarts of
	// the agent in this boot (RestoreXids); without, they last until the
	// agent restarts.
	BootID string
	// Registerer, when set, registers the plugin's metrics (for example
	// controller-runtime's metrics.Registry).
	Registerer prometheus.Registerer
}

// Plugin implements kubeletplugin.DRAPlugin.
type Plugin struct {
	cfg            Config
	cdi            *cdiapi.Cache
	checkpointPath string
	// checkpointFound: New read a checkpoint file (an empty checkpoint
	// otherwise: a first start, or a file moved away).
	checkpointFound bool

	// mu guards claims (the checkpoint's contents in memory) and the files.
	// The helper serialises prepare and unprepare; PreparedDevices runs
	// concurrently from the agent.
	mu     sync.Mutex
	claims map[types.UID]PreparedClaim
	// nodesMu serialises making device nodes (ensureDeviceNodes): the
	// kubelet's prepare and the agent's re-prepares (RefreshRecreated,
	// RestoreSpecs) run at once, and one's remaking of a stale node
	// removed the node the other had just made.
	nodesMu sync.Mutex

	ignoredXids []uint64
	metrics     *metrics
	// xidMu guards the Xid marks (recordXid) and healthWake.
	xidMu sync.Mutex
	// xidDevices are the marks by MIG device UUID (an Xid of its GPU
	// instance), xidGPUs by GPU index (an Xid of the whole GPU: every
	// device on it).
	xidDevices map[string]xidMark
	xidGPUs    map[int]xidMark
	// xidCleared is the ID of the last clear request applied (ClearXids).
	xidCleared string
	// healthWake is closed when the health reports should go out at once
	// (healthChanged).
	healthWake chan struct{}
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
	p := &Plugin{cfg: cfg, cdi: cache, checkpointPath: filepath.Join(cfg.CheckpointDir, CheckpointFile),
		ignoredXids: cfg.IgnoredXids, xidDevices: map[string]xidMark{}, xidGPUs: map[int]xidMark{}, healthWake: make(chan struct{})}
	if p.ignoredXids == nil {
		p.ignoredXids = DefaultIgnoredXids
	}
	if p.metrics, err = newMetrics(cfg.Registerer, p.markCounts); err != nil {
		return nil, fmt.Errorf("creating kubelet plugin: %w", err)
	}
	if p.claims, err = readCheckpoint(p.checkpointPath); err != nil {
		return nil, fmt.Errorf("creating kubelet plugin: %w; %s", err, unreadableCheckpointHelp(p.checkpointPath))
	}
	if _, err := os.Stat(p.checkpointPath); err == nil {
		p.checkpointFound = true
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
// checkpoint does not hold prepared, and temporary files a crash left: the
// checkpoint's (checkpointTemps) in the checkpoint directory, and its own
// specs' in the CDI directory (specTemps). A
// prepare writes the spec before the checkpoint and an unprepare removes
// it first, so such a spec is one of a prepare that never succeeded (the
// agent stopped between the two writes, and the kubelet did not prepare
// again, e.g. the pod was deleted meanwhile): no container was given its
// devices, and the kubelet prepares again any claim it still needs,
// writing the spec again. Left, these files pile up over a node's life,
// and the container runtime reads them all each time it refreshes its CDI
// registry. Other vendors' and classes' files are not touched, nor files
// whose name carries no claim UID, nor any spec where New found no
// checkpoint file (an error names them). Call it once
// after New, before Start (nothing is prepared concurrently). It returns
// the paths removed and the errors of those it could not remove or list.
func (p *Plugin) RemoveStaleSpecs() ([]string, error) {
	var removed, kept []string
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
		if !ok || !isClaimUID(uid) {
			// Not a name this version writes (another version's
			// file, say): left alone.
			continue
		}
		if _, held := p.claims[types.UID(uid)]; held {
			continue
		}
		if !p.checkpointFound {
			// Without a checkpoint file there is no telling the specs
			// of running containers from stale ones (the checkpoint
			// directory moved, say, by a changed kubelet plugin
			// path): removing them would fail those containers'
			// restarts (the kubelet does not prepare again).
			kept = append(kept, e.Name())
			continue
		}
		if err := p.cdi.RemoveSpec(e.Name()); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("removing stale CDI spec: %w", err))
			continue
		}
		removed = append(removed, filepath.Join(p.cfg.CDIDir, e.Name()))
	}
	if len(kept) > 0 {
		errs = multierror.Append(errs, fmt.Errorf("no checkpoint file at %s, so the CDI specs %s, which running containers may use, are left in place; "+
			"if the checkpoint directory moved (agent.hostPaths.kubeletPlugins changed), put it back", p.checkpointPath, strings.Join(kept, ", ")))
	}
	temps := p.specTemps()
	for _, pattern := range []string{checkpointTemps, xidMarksTemps} {
		matched, err := filepath.Glob(filepath.Join(p.cfg.CheckpointDir, pattern))
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("listing checkpoint temporary files: %w", err))
		}
		temps = append(temps, matched...)
	}
	for _, path := range temps {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = multierror.Append(errs, fmt.Errorf("removing temporary file: %w", err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, errs
}

// cdiSpecTemps is the name pattern of the temporary files the CDI library
// writes a spec through before it renames it (cdi.Cache.WriteSpec), in the
// CDI directory every vendor shares.
const cdiSpecTemps = "spec.*.tmp"

// specTemps lists the temporary spec files in the CDI directory that are
// this driver's (their kind is its vendor and class): left by a write the
// agent was killed in. Called before Start, none is being written; one of
// another vendor, or too short to name its kind, is left alone.
func (p *Plugin) specTemps() []string {
	matched, _ := filepath.Glob(filepath.Join(p.cfg.CDIDir, cdiSpecTemps))
	kind := []byte(fmt.Sprintf("%q:%q", "kind", cdiVendor(p.cfg.DriverName)+"/"+CDIClass))
	var out []string
	for _, path := range matched {
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSpecTempBytes {
			continue
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, kind) {
			out = append(out, path)
		}
	}
	return out
}

// maxSpecTempBytes bounds the temporary spec files specTemps reads: a
// claim's spec is a few KiB.
const maxSpecTempBytes = 1 << 20

// isClaimUID reports whether s is a UID as the API server gives objects
// (an RFC 4122 UUID in its 36-character form).
func isClaimUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
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

// sliceControllerMessages are the messages with which the ResourceSlice
// controller of k8s.io/dynamic-resource-allocation (v0.37,
// resourceslice/resourceslicecontroller.go) reports its errors through
// the helper's HandleError; the helper's other recoverable errors (stale
// device health reports) are not about the slices.
var sliceControllerMessages = sets.New("processing ResourceSlice objects", "pool validation failed", "processing update DriverResources")

// HandleError implements kubeletplugin.DRAPlugin: background errors (e.g.
// publishing ResourceSlices) are logged; fields the API server dropped are
// passed to Config.OnDroppedFields, the ResourceSlice controller's other
// errors to Config.OnPublishError, errors the helper
// marks as not recoverable to Config.OnFatalError.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	var dropped *resourceslice.DroppedFieldsError
	switch {
	case errors.As(err, &dropped):
		if p.cfg.OnDroppedFields != nil {
			p.cfg.OnDroppedFields(dropped)
		}
	case sliceControllerMessages.Has(msg) && p.cfg.OnPublishError != nil:
		p.cfg.OnPublishError(fmt.Errorf("%s: %w", msg, err))
	}
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && p.cfg.OnFatalError != nil {
		p.cfg.OnFatalError(fmt.Errorf("%s: %w", msg, err))
	}
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

// PreparedUUIDs returns the UUIDs of the prepared devices (PreparedDevice.UUID:
// a MIG device's, "MIG-...", or a whole GPU's, "GPU-..."), which name the
// devices whatever NVML index their GPU has now.
func (p *Plugin) PreparedUUIDs() sets.Set[string] {
	out := sets.New[string]()
	for _, c := range p.PreparedClaims() {
		for _, d := range c.Devices {
			if d.UUID != "" {
				out.Insert(d.UUID)
			}
		}
	}
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
