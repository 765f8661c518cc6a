// Command miglayout-agent is the miglayout node agent: one per GPU node. It
// publishes the node's GPUs and MIG devices as a DRA pool, prepares allocated
// devices for containers as the DRA kubelet plugin, and repartitions GPUs to
// the layout of the node's NodeMigLayout, safely.
//
// It talks to real NVML (libnvidia-ml.so.1) by default, or with --simulate to
// the NVML simulator, for tests and the demo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/managerrun"
	"github.com/miglayout/miglayout/pkg/metricsopts"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/plugin"
	"github.com/miglayout/miglayout/pkg/slices"
)

type options struct {
	nodeName          string
	driverName        string
	simulate          string
	simulatorState    string
	stateDir          string
	cdiDir            string
	hostRoot          string
	sysfsRoot         string
	devRoot           string
	driverRoot        string
	hostDriverRoot    string
	registrarDir      string
	pluginDir         string
	settle            time.Duration
	bindingConditions bool
	resync            time.Duration
	metricsAddr       string
	metricsSecure     bool
	healthAddr        string
	leaseNamespace    string
	leaseDuration     time.Duration
	maxPass           time.Duration
	allowDevicePlugin bool
	orphanGrace       time.Duration
	healthInterval    time.Duration
	xidHealth         bool
	bootIDFile        string
	ignoredXidList    string
}

func main() {
	o, err := parseOptions(os.Args[1:], pflag.ExitOnError)
	if err != nil { // a bad flag: ExitOnError exits first
		fmt.Fprintln(os.Stderr, "miglayout-agent:", err)
		os.Exit(2)
	}
	logger := klog.Background().WithValues("node", o.nodeName)
	ctrl.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	if err := run(ctx, o); err != nil {
		if stoppedEarly(ctx, err) {
			logger.Info("Agent stopped before it started", "err", err)
			klog.Flush()
			return
		}
		logger.Error(err, "Agent failed")
		klog.Flush()
		os.Exit(1)
	}
}

// parseOptions parses the agent's command line (args, without the program
// name); errorHandling is the flag set's (main exits on a bad flag). A
// simulated node (--simulate) checks and makes no device nodes unless
// --dev-root is given.
func parseOptions(args []string, errorHandling pflag.ErrorHandling) (options, error) {
	var o options
	fs := pflag.NewFlagSet("miglayout-agent", errorHandling)
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&o.driverName, "driver-name", slices.DefaultDriverName, "DRA driver name to publish devices under (e.g. gpu.nvidia.com on clusters that replace NVIDIA's driver)")
	fs.StringVar(&o.simulate, "simulate", "", "use the NVML simulator with this hardware instead of real NVML, e.g. 4xA100-SXM4-80GB or 2xH100-SXM5-80GB,1xA30")
	fs.StringVar(&o.simulatorState, "simulator-state", "", "state file of the NVML simulator (kept across restarts; shared with other processes)")
	fs.StringVar(&o.stateDir, "state-dir", "/var/lib/miglayout", "directory for the repartitioning journal, the GPUs' NVML profile tables ("+profileTablesFile+"), and the lock (agent.lock) that keeps a second agent process on the node waiting")
	fs.StringVar(&o.cdiDir, "cdi-dir", plugin.DefaultCDIDir, "directory the CDI specs of prepared claims are written to")
	fs.StringVar(&o.hostRoot, "host-root", plugin.DefaultHostRoot, "where the host's / is mounted (for /proc/driver/nvidia/capabilities)")
	fs.StringVar(&o.sysfsRoot, "sysfs-root", "/sys", "where the host's sysfs is seen, for each GPU's PCIe root complex and NUMA node (attributes resource.kubernetes.io/pcieRoot and numaNode); \"\" publishes neither; not read with --simulate")
	fs.StringVar(&o.devRoot, "dev-root", "/dev", "where the host's /dev is mounted: device nodes a prepared claim's CDI spec names must exist there, and missing /dev/nvidia-caps nodes of its MIG devices are created there (empty: none checked or created; the default with --simulate)")
	fs.StringVar(&o.registrarDir, "kubelet-registrar-dir", "/var/lib/kubelet/plugins_registry", "kubelet plugin registration directory")
	fs.StringVar(&o.pluginDir, "kubelet-plugins-dir", plugin.DefaultPluginDir, "kubelet plugins directory; the driver's socket and checkpoint go to <dir>/<driver name>")
	fs.DurationVar(&o.settle, "settle-period", 5*time.Second, "how long a drain waits after tainting devices before re-checking allocations (covers scheduling decisions in flight)")
	fs.BoolVar(&o.bindingConditions, "device-binding-conditions", false, "publish devices with binding conditions (DRA device binding conditions, on by default from Kubernetes 1.36): a pod is bound only after the agent confirms its device, and never to a device being drained, even where the scheduler decided before it saw the drain taint; each pod then waits about 5 s longer to be bound (the scheduler polls the conditions every 5 s)")
	fs.DurationVar(&o.resync, "resync-period", time.Minute, "period of reconciles without a trigger")
	fs.StringVar(&o.driverRoot, "nvidia-driver-root", "", "where the host's NVIDIA driver installation is mounted (e.g. /driver-root): libnvidia-ml.so.1 is loaded by path from its library directories, falling back to the library search path when none holds it; empty: the library search path only")
	fs.StringVar(&o.hostDriverRoot, "host-nvidia-driver-root", "/", "the path on the host of the NVIDIA driver installation --nvidia-driver-root mounts (/run/nvidia/driver for the GPU Operator's containerised driver): a device node a prepared claim's CDI spec names is looked for in <--nvidia-driver-root>/dev before --dev-root, and the spec gives one found there by its host path <this>/dev/...; \"/\": a driver installed on the host, whose nodes are in /dev")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8081", "address of the Prometheus metrics endpoint (0 disables)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, metricsopts.SecureFlagHelp)
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8082", "address of the /healthz and /readyz endpoints (0 disables)")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", "", "namespace of the agent's heartbeat Lease miglayout-agent-<node> (the controller's --agent-lease-namespace; empty: no heartbeat, and a controller that checks Leases reports the node AgentLost 40s after the agent's first report)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 40*time.Second, "how long the heartbeat Lease holds unrenewed; the agent renews it every quarter of this (whole seconds, at least 4s)")
	fs.BoolVar(&o.allowDevicePlugin, "allow-nvidia-device-plugin", false, "publish and change the node's GPUs even where its kubelet advertises NVIDIA's device plugin resources (nvidia.com/gpu, nvidia.com/gpu.*, nvidia.com/mig-*), which hand the same GPUs to pods outside DRA; by default the agent then publishes no device and changes no GPU (status reason DevicePluginActive). Set it only where the device plugin serves no GPU this agent sees")
	fs.DurationVar(&o.maxPass, "max-pass-duration", defaultMaxPass, "how long one repartitioning pass may run before /healthz fails (an NVML call or API request that hangs): the liveness probe then restarts the agent, which resumes from its journal; by default 10m, or the settle period plus 5m where that is longer")
	fs.BoolVar(&o.xidHealth, "device-health-xids", true, "watch the GPUs' Xid critical errors (NVML events) and report the devices an Xid hits Unhealthy to the kubelet at once and publish them with the NoSchedule taint miglayout.io/xid, until the node reboots or kubectl miglayout clear-xids clears them (a MIG device made again after an Xid of its GPU instance is healthy; after an Xid of the whole GPU, every device on it is hit)")
	fs.StringVar(&o.bootIDFile, "boot-id-file", "/proc/sys/kernel/random/boot_id", "the node's boot ID (not namespaced: a container reads the host's), with which the Xid marks are kept across restarts of the agent until the node reboots (empty: kept in memory, forgotten when the agent restarts)")
	fs.StringVar(&o.ignoredXidList, "device-health-ignored-xids", formatXids(plugin.DefaultIgnoredXids), "comma-separated Xids that leave devices Healthy: by default those NVIDIA's XID guide puts down to the application (empty: none)")
	fs.DurationVar(&o.healthInterval, "device-health-interval", plugin.DefaultHealthInterval, "how often the kubelet plugin reports the health of the prepared devices to the kubelet (DRAResourceHealth; the kubelet shows it in the containers' status.allocatedResourcesStatus); each report holds for three intervals, at least 30s (0: the default)")
	fs.DurationVar(&o.orphanGrace, "orphaned-claim-grace", agent.DefaultOrphanGrace, "how long a ResourceClaim the kubelet plugin still holds prepared must be gone from the API server (or allocated no device of the node) before the agent releases its preparation (the kubelet never unprepared it: its own record was lost, or the pod and claim were force-deleted while the plugin was down); until then its devices are kept (0: the default)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	// --kubeconfig, registered by controller-runtime for ctrl.GetConfig.
	fs.AddGoFlag(flag.CommandLine.Lookup("kubeconfig"))
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if err := managerrun.NoArgs(fs.Args()); err != nil {
		return options{}, err
	}
	if o.simulate != "" && !fs.Changed("dev-root") {
		o.devRoot = "" // simulated GPUs have no device nodes
	}
	if !fs.Changed("max-pass-duration") {
		o.maxPass = max(defaultMaxPass, o.settle+passHeadroom)
	}
	if !filepath.IsAbs(o.hostDriverRoot) {
		return options{}, fmt.Errorf("--host-nvidia-driver-root=%q: want an absolute path", o.hostDriverRoot)
	}
	return o, nil
}

// defaultMaxPass is --max-pass-duration's default, and passHeadroom what a
// pass that drains is given beyond its settle period where the settle
// period is long: the waits for the drain publication, the withdrawal and
// the republication to be served (up to 30 s each), the live reads of the
// allocations and the NVML work. A long settle period (one that outlasts
// gang scheduling's Permit waits) then does not make /healthz fail, and the
// liveness probe restart the agent, in every pass that drains.
const (
	defaultMaxPass = 10 * time.Minute
	passHeadroom   = 5 * time.Minute
)

// driverDevDirs are the device directory of a driver installed in a
// container as the agent sees it (<--nvidia-driver-root>/dev) and on the
// host (<--host-nvidia-driver-root>/dev), for plugin.Config; empty where
// the driver is the host's (--host-nvidia-driver-root=/), or no device
// node is checked (no --dev-root) or the driver root is not mounted.
func (o options) driverDevDirs() (driverDev, hostDriverDev string) {
	if o.devRoot == "" || o.driverRoot == "" || filepath.Clean(o.hostDriverRoot) == "/" {
		return "", ""
	}
	return filepath.Join(o.driverRoot, "dev"), filepath.Join(o.hostDriverRoot, "dev")
}

// stoppedEarly reports whether err is run's answer to the stop signal
// arriving before the agent started (waiting for the state lock that a
// terminating agent still holds): a normal exit, not a failure.
func stoppedEarly(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.Is(err, managerrun.ErrNotStopped)
}

// ensureMIGManagementNodes makes the host's /dev/nvidia-caps nodes of the
// MIG config and monitor capabilities before NVML first needs them
// (plugin.EnsureMIGManagementNodes). It only logs: a node whose driver has
// no such capability must still run, and where a node cannot be made,
// NVML's own error on the first MIG change says more.
func ensureMIGManagementNodes(ctx context.Context, o options) {
	logger := klog.FromContext(ctx)
	nodes, missing, err := plugin.EnsureMIGManagementNodes(o.devRoot, o.hostRoot)
	if err != nil {
		logger.Error(err, "MIG management device nodes not made: NVML may refuse MIG changes with ERROR_NO_PERMISSION")
	}
	if len(missing) > 0 {
		logger.Info("MIG capability files not found: a driver older than MIG, or the host's /proc/driver/nvidia not mounted under --host-root", "missing", missing)
	}
	if len(nodes) > 0 {
		logger.V(1).Info("MIG management device nodes present", "nodes", nodes)
	}
}

// bootID reads --boot-id-file; "" where it is empty or cannot be read
// (logged): the Xid marks are then kept in memory only.
func (o options) bootID(ctx context.Context) string {
	if o.bootIDFile == "" {
		return ""
	}
	data, err := os.ReadFile(o.bootIDFile)
	id := strings.TrimSpace(string(data))
	if err == nil && id == "" {
		err = errors.New("the file is empty")
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the node's boot ID failed: Xid marks are kept in memory only, and a restart of the agent forgets them", "file", o.bootIDFile)
		return ""
	}
	return id
}

// ignoredXids parses --device-health-ignored-xids for plugin.Config: a
// comma-separated list of Xid numbers; "" is none (an empty list, not nil,
// which would be the default).
func (o options) ignoredXids() ([]uint64, error) {
	out := []uint64{}
	if strings.TrimSpace(o.ignoredXidList) == "" {
		return out, nil
	}
	for _, f := range strings.Split(o.ignoredXidList, ",") {
		x, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--device-health-ignored-xids=%q: %q is not an Xid number", o.ignoredXidList, f)
		}
		out = append(out, x)
	}
	return out, nil
}

func formatXids(xs []uint64) string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, strconv.FormatUint(x, 10))
	}
	return strings.Join(out, ",")
}

// profileTablesFile is the file in --state-dir that keeps each GPU's NVML
// profile table across restarts (gpu.NVMLManager.KeepProfileTables).
const profileTablesFile = "nvml-profiles.json"

// openGPUs opens NVML (or the simulator, --simulate), keeping the GPUs'
// profile tables in the state directory, which the caller holds locked. It
// also returns the NVML manager under the wrappers, which delivers the
// GPUs' Xid events.
func openGPUs(ctx context.Context, o options) (gpu.Manager, gpu.XidSource, error) {
	if o.simulate == "" {
		var m *gpu.NVMLManager
		var err error
		if o.driverRoot != "" {
			m, err = gpu.OpenAt(ctx, o.driverRoot)
		} else {
			m, err = gpu.Open()
		}
		if err != nil {
			return nil, nil, err
		}
		m.KeepProfileTables(ctx, filepath.Join(o.stateDir, profileTablesFile))
		if o.sysfsRoot == "" {
			return m, m, nil
		}
		return agent.WithPCITopology(m, o.sysfsRoot), m, nil
	}
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: o.simulate, StatePath: o.simulatorState, Seed: o.nodeName})
	if err != nil {
		return nil, nil, fmt.Errorf("starting NVML simulator: %w", err)
	}
	m, err := gpu.NewNVML(sim, mig.DefaultCatalog())
	if err != nil {
		return nil, nil, err
	}
	m.KeepProfileTables(ctx, filepath.Join(o.stateDir, profileTablesFile))
	return &simulatedCapabilities{Manager: m, hostRoot: o.hostRoot}, m, nil
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	if o.nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	// The node name is the pool's and the heartbeat Lease's: a name no Node
	// can have would publish a pool no scheduler matches.
	if errs := validation.IsDNS1123Subdomain(o.nodeName); len(errs) > 0 {
		return fmt.Errorf("--node-name=%q: not a node name: %s", o.nodeName, strings.Join(errs, "; "))
	}
	if err := slices.ValidateDriverName(o.driverName); err != nil {
		return fmt.Errorf("--driver-name: %w", err)
	}
	if err := managerrun.ValidateNamespace("lease-namespace", o.leaseNamespace); err != nil {
		return err
	}
	if o.settle < 0 {
		return fmt.Errorf("--settle-period=%s: want 0 or more", o.settle)
	}
	if o.resync <= 0 {
		return fmt.Errorf("--resync-period=%s: want more than 0", o.resync)
	}
	// The manager listens only once started, after the kubelet plugin
	// registered: a typo would register, then exit, again and again.
	if err := managerrun.ValidateBindAddress("metrics-bind-address", o.metricsAddr); err != nil {
		return err
	}
	if err := managerrun.ValidateBindAddress("health-probe-bind-address", o.healthAddr); err != nil {
		return err
	}
	if o.maxPass <= o.settle {
		return fmt.Errorf("--max-pass-duration=%s must exceed --settle-period=%s: every pass that drains waits the settle period", o.maxPass, o.settle)
	}
	if _, err := o.ignoredXids(); err != nil {
		return err
	}
	if o.healthInterval != 0 && o.healthInterval < time.Second {
		return fmt.Errorf("--device-health-interval=%s: want at least 1s (0: the default, %s)", o.healthInterval, plugin.DefaultHealthInterval)
	}
	if o.orphanGrace != 0 && o.orphanGrace < time.Second {
		return fmt.Errorf("--orphaned-claim-grace=%s: want at least 1s (0: the default, %s)", o.orphanGrace, agent.DefaultOrphanGrace)
	}
	// The Lease holds its duration as int32 seconds: a longer one would be
	// written negative, and the API server would refuse every heartbeat.
	if o.leaseDuration < 4*time.Second || o.leaseDuration > math.MaxInt32*time.Second || o.leaseDuration%time.Second != 0 {
		return fmt.Errorf("--lease-duration=%s: want whole seconds, at least 4s and at most %ds", o.leaseDuration, math.MaxInt32)
	}
	managerrun.SetMemoryLimit(ctx)
	// One agent per node: before NVML, the journal or the checkpoint.
	// stuck: the manager did not stop in time, a pass may still be inside
	// NVML.
	stuck := false
	unlock, err := lockStateDir(ctx, o.stateDir)
	if err != nil {
		return err
	}
	defer releaseState(unlock, &stuck)()
	if o.simulate == "" && o.devRoot != "" {
		ensureMIGManagementNodes(ctx, o)
	}
	gpus, xids, err := openGPUs(ctx, o)
	if err != nil {
		return err
	}
	if !o.xidHealth {
		xids = nil
	}
	ignoredXids, err := o.ignoredXids()
	if err != nil {
		return err
	}
	// Not where the manager did not stop in time: a pass may still be
	// inside NVML, and Shutdown waits for calls in flight; the process
	// exits, and the journal resumes the pass.
	defer func() {
		if !stuck {
			_ = gpus.Shutdown()
		}
	}()

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsopts.Options(o.metricsAddr, o.metricsSecure),
		HealthProbeBindAddress: o.healthAddr,
		Cache:                  agent.CacheOptions(o.nodeName, o.driverName),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}

	locks := gpulock.New()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pluginDataDir := filepath.Join(o.pluginDir, o.driverName)
	// The pool's publisher is the plugin helper started below; its
	// ResourceSlice controller's reports of dropped fields go to it.
	inventory := &agent.PoolInventory{NodeName: o.nodeName, Driver: o.driverName, Live: mgr.GetAPIReader()}
	rec := &agent.NodeReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), NodeName: o.nodeName,
		Recorder: mgr.GetEventRecorder("miglayout-agent"), Resync: o.resync, MaxPass: o.maxPass,
		AllowDevicePlugin: o.allowDevicePlugin, OnNodeReplaced: func(err error) { cancel(err) }}
	driverDev, hostDriverDev := o.driverDevDirs()
	bootID := o.bootID(ctx)
	drv, err := plugin.New(plugin.Config{
		DriverName: o.driverName, NodeName: o.nodeName, GPUs: gpus, Locks: locks,
		CDIDir: o.cdiDir, CheckpointDir: pluginDataDir, HostRoot: o.hostRoot, DevRoot: o.devRoot,
		DriverDevRoot: driverDev, HostDriverDevRoot: hostDriverDev,
		OnFatalError:    func(err error) { cancel(err) },
		OnDroppedFields: inventory.DroppedFields,
		OnPublishError:  inventory.PublishError,
		OnUnprepared:    rec.Wake,
		OnXid:           rec.XidError,
		HealthInterval:  o.healthInterval,
		Xids:            xids,
		IgnoredXids:     ignoredXids,
		Registerer:      metrics.Registry,
		BootID:          bootID,
	})
	if err != nil {
		return err
	}
	inventory.Faults = drv
	rec.XidMarks = drv
	drv.RestoreXids(ctx)
	for uid, err := range drv.RestoreSpecs(ctx) {
		// After a reboot, expected: the claim's device is made again by
		// the first pass (restoreHeld), which then writes its spec.
		logger.Info("CDI spec of a prepared claim not restored yet: the agent's first pass tries again (the kubelet does not prepare a claim it holds prepared again)", "claim", uid, "err", err)
	}
	removed, err := drv.RemoveStaleSpecs()
	if len(removed) > 0 {
		logger.Info("Removed CDI specs of claims never prepared and checkpoint temporary files left by an earlier stop", "files", removed)
	}
	if err != nil {
		logger.Error(err, "Leftover CDI specs or checkpoint temporary files not removed")
	}
	helper, err := drv.Start(ctx, kube,
		kubeletplugin.RegistrarDirectoryPath(o.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDataDir))
	if err != nil {
		return err
	}
	defer helper.Stop()

	journal, err := agent.OpenJournal(filepath.Join(o.stateDir, "journal.json"))
	if err != nil {
		return err
	}
	if err := journal.SetAside(); err != nil {
		logger.Error(err, "Starting with an empty journal: check the GPUs of this node for a pending MIG mode change or GPU instances left half made")
	}
	for _, e := range journal.Entries() {
		logger.Info("Resuming work interrupted by a restart", "gpu", e.GPU, "step", e.Step, "desired", e.Desired, "done", e.Done)
	}
	var gate *agent.BindingGate
	metricsSet := agent.NewMetrics(metrics.Registry)
	if o.bindingConditions {
		gate = &agent.BindingGate{}
		binder := &agent.Binder{Client: mgr.GetClient(), Gate: gate, Driver: o.driverName, NodeName: o.nodeName,
			Recorder: mgr.GetEventRecorder("miglayout-agent"), Metrics: metricsSet}
		if err := binder.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the binding-condition controller: %w", err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &resourceapi.ResourceClaim{}, agent.AllocatedPoolIndex, agent.AllocatedPools); err != nil {
		return fmt.Errorf("indexing ResourceClaims by allocated pool: %w", err)
	}
	inventory.Publisher, inventory.Binding = helper, gate
	rep := &agent.Repartitioner{
		GPUs:      gpus,
		Inventory: inventory,
		Allocations: &agent.ClaimAllocations{Cached: mgr.GetClient(), Live: mgr.GetAPIReader(),
			Driver: o.driverName, Pool: o.nodeName, Binding: gate, Indexed: true},
		Prepared:     preparedSet{drv},
		Locks:        locks,
		Journal:      journal,
		SettlePeriod: o.settle,
		Metrics:      metricsSet,
		Driver:       o.driverName,
		Reread:       agent.LiveSpecs(mgr.GetAPIReader(), o.nodeName),
	}
	rec.Repartitioner = rep
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up reconciler: %w", err)
	}
	if err := mgr.Add(&agent.OrphanedClaims{Claims: preparedSet{drv}, Cached: mgr.GetClient(), Live: mgr.GetAPIReader(),
		NodeName: o.nodeName, Driver: o.driverName, Recorder: mgr.GetEventRecorder("miglayout-agent"), Metrics: metricsSet, Grace: o.orphanGrace}); err != nil {
		return fmt.Errorf("adding the orphaned-claim sweep: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(drv.WatchXids)); err != nil {
		return fmt.Errorf("adding the Xid watch: %w", err)
	}
	if o.leaseNamespace != "" {
		// From the manager's start to the return, through the manager's
		// stop (backgroundHeartbeat); stopped before NVML is shut down.
		hbKube, err := heartbeatClient(cfg, o.leaseDuration)
		if err != nil {
			return err
		}
		synced := func(ctx context.Context) bool {
			for _, obj := range []client.Object{&v1alpha1.NodeMigLayout{}, &corev1.Node{}, &resourceapi.ResourceSlice{}, &resourceapi.ResourceClaim{}} {
				// Made and started if not yet; waits for its sync. A
				// failure (discovery, a REST mapping) is retried, as the
				// controller's watches retry theirs.
				if err := wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(ctx context.Context) (bool, error) {
					if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
						if ctx.Err() == nil {
							logger.Error(err, "Getting an informer the heartbeat waits for; retrying", "kind", fmt.Sprintf("%T", obj))
						}
						return false, nil
					}
					return true, nil
				}); err != nil {
					return false
				}
			}
			return mgr.GetCache().WaitForCacheSync(ctx)
		}
		hb, stopHeartbeat := backgroundHeartbeat(logger, hbKube, o.nodeName, o.leaseNamespace, o.leaseDuration, synced)
		defer stopHeartbeat()
		if err := mgr.Add(hb); err != nil {
			return fmt.Errorf("adding the heartbeat: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("repartitioner", rec.Healthz); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", rec.Readyz); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("kubelet-registration", plugin.KubeletRegistration(helper.RegistrationStatus)); err != nil {
		return err
	}
	logger.Info("Starting agent", "driver", o.driverName, "simulated", o.simulate != "", "bindingConditions", o.bindingConditions, "settle", o.settle)
	if err := managerrun.Start(ctx, mgr, managerrun.StopWithin); err != nil {
		stuck = errors.Is(err, managerrun.ErrNotStopped)
		return fmt.Errorf("running manager: %w", err)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}
