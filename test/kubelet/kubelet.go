// Package kubelet is the stand-in kubelet of miglayout's e2e tests and demo: the only part
// of a test cluster that stands in for a real node (see test/cluster).
//
// For the pods bound to its node it does what a kubelet does for DRA, through the same
// interfaces:
//
//   - it watches the registrar directory (the agent's --kubelet-registrar-dir) like the
//     kubelet's plugin watcher, calls GetInfo on each "<driver>-reg.sock", connects to the
//     DRA endpoint the plugin names, and confirms with NotifyRegistrationStatus;
//   - for a pod bound to the node it resolves the pod's ResourceClaims (spec.resourceClaims
//     resourceClaimName, or status.resourceClaimStatuses for claims from a template, and
//     status.extendedResourceClaimStatus for extended resources backed by DRA), waits
//     until each is allocated and reserved for the pod, and calls NodePrepareResources
//     (k8s.io/kubelet/pkg/apis/dra/v1) on the plugin of each driver in the allocation,
//     once per claim: another pod of the claim gets the CDI device IDs from the claim
//     info cache, as with the kubelet, which calls the plugin again only after it
//     restarted without its checkpoint;
//   - it resolves the returned CDI device IDs in the CDI spec directory (the agent's
//     --cdi-dir) and, for every GPU or MIG device UUID a container would see, starts a
//     simulated process on that GPU or MIG device in the NVML simulator (so that the
//     agent sees the device in use, as it would with a real workload): the NVIDIA container
//     toolkit's device list mounts (/dev/null at /var/run/nvidia-container-devices/<UUID>)
//     where the CDI devices carry them, as a toolkit that accepts them reads them first,
//     otherwise NVIDIA_VISIBLE_DEVICES; a pod labelled IdleLabel runs none (a container
//     that holds its devices without a CUDA context, as an idle notebook does);
//   - it sets the pod Running (Ready conditions, running container statuses), and
//     follows the device health its plugins report (DRAResourceHealth v1, as the kubelet
//     with its feature gate ResourceHealthStatus, on by default from 1.36): each
//     container's status.allocatedResourcesStatus gives the health of its claims'
//     devices, Unknown once a device's last report is older than its health check
//     timeout (30 s where the report gives none);
//   - when the pod is being deleted it stops the pod's processes, calls
//     NodeUnprepareResources for claims no other pod on the node uses, and deletes the pod
//     with grace period 0, so that deletion completes and the claim controller releases
//     the claims;
//   - it renews the node's Lease in kube-node-lease;
//   - it deletes the node's ResourceSlices when it starts (no driver is usable before its
//     plugin registers again) and a driver's slices once that driver has had no registered
//     plugin with a live gRPC connection for Config.SliceWipeDelay, as the kubelet's DRA
//     plugin manager does.
//
// Failures to prepare are reported as FailedPrepareDynamicResources events on the pod and
// retried with backoff, as the kubelet does. Containers never run: there is no runtime.
//
// Because nothing stands in for the NVIDIA driver's /proc either, Config.HostRoot makes the
// stand-in kubelet write the MIG capability files
// (<HostRoot>/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<N>/[ci<M>/]access) of every
// MIG device in the simulator before each prepare, as the driver does when the GPU and
// compute instance are created.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/plugin"
)

// IdleLabel set to "true" on a pod makes the stand-in kubelet start no simulated process
// on its devices: the pod runs, its claims prepared, but NVML sees the devices unused, as
// with a container that holds them without a CUDA context (an idle notebook, a server
// before its first request). Only the allocation and the preparation then keep the
// devices in use.
const IdleLabel = "kubelet.miglayout.io/idle"

// Event reasons the stand-in kubelet records on pods (the real kubelet's).
const (
	EventFailedPrepare   = "FailedPrepareDynamicResources"
	EventFailedUnprepare = "FailedUnprepareDynamicResources"
	EventStarted         = "Started"
)

// Config configures Start.
type Config struct {
	// NodeName is the node whose pods this kubelet runs. Required.
	NodeName string
	// Client is an admin client. Required.
	Client kubernetes.Interface
	// RegistrarDir is where DRA plugins put their registration sockets (the agent's
	// --kubelet-registrar-dir). Required.
	RegistrarDir string
	// CDIDir is where the plugins write CDI specs (the agent's --cdi-dir): the device
	// UUIDs of the simulated processes come from the NVIDIA_VISIBLE_DEVICES edits there.
	// Required with SimulatorState.
	CDIDir string
	// SimulatorState is the agent's --simulator-state file. Empty: no processes are
	// recorded.
	SimulatorState string
	// HostRoot is the agent's --host-root; when set, the MIG capability files of the
	// simulated MIG devices are written under it before each prepare (see the package
	// documentation).
	HostRoot string
	// ProcessMemoryMiB is the memory each simulated process uses; default 1024.
	ProcessMemoryMiB int64
	// LeasePeriod is how often the node's Lease is renewed; default 10s, negative: never.
	LeasePeriod time.Duration
	// SliceWipeDelay is how long a DRA driver may stay unusable before its ResourceSlices
	// of the node are deleted; default DefaultSliceWipeDelay (the kubelet's), negative:
	// never (the slices of the start are deleted all the same).
	SliceWipeDelay time.Duration
	// Logger receives the kubelet's log; default klog.Background().
	Logger *klog.Logger
}

// Kubelet is a running stand-in kubelet.
type Kubelet struct {
	cfg      Config
	logger   klog.Logger
	client   kubernetes.Interface
	lister   corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[string]
	reg      *registry
	recorder record.EventRecorder
	bcast    record.EventBroadcaster
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stop     sync.Once
	wipes    atomic.Int64 // ResourceSlice deletions done (SliceWipes)

	simMu sync.Mutex
	sim   *nvmlsim.Sim

	// Owned by the worker goroutine; mu only for readers (Pods).
	mu sync.Mutex
	claimState
	// health is the devices' health as their plugins last reported it
	// (watchHealth); mu guards it.
	health map[healthKey]deviceHealth
	// clock tells the time of health reports and when they time out.
	clock clock.PassiveClock
}

// claimState is what the kubelet keeps across its restarts (the real one in its
// checkpoint and its running containers).
type claimState struct {
	pods       map[types.UID]*podState
	claimUsers map[types.UID]map[types.UID]bool // claim UID → pods on this node using it
	// prepared is the kubelet's claim info cache: claim UID → the devices its
	// preparation returned. A pod whose claim is prepared already gets their CDI
	// device IDs without a call to the plugin, as the real kubelet's pods do; the
	// claim is unprepared when its last pod on the node ends.
	prepared map[types.UID][]preparedDevice
}

// preparedDevice is one device of a prepared claim, as NodePrepareResources returned it.
type preparedDevice struct {
	driver, pool, device string
	requests             []string
	cdiIDs               []string
}

// podState is what the kubelet did for one pod.
type podState struct {
	key     string // namespace/name
	uid     types.UID
	claims  []claimRef
	pids    []uint32
	devices []string // UUIDs the pod's processes run on
	running bool
}

type claimRef struct {
	namespace, name string
	uid             types.UID
	drivers         []string
}

// PodInfo describes a pod the kubelet runs, for tests.
type PodInfo struct {
	Namespace, Name string
	UID             types.UID
	// Claims are the prepared claims (namespace/name).
	Claims []string
	// DeviceUUIDs are the GPU or MIG device UUIDs the pod's containers see
	// (NVIDIA_VISIBLE_DEVICES from the CDI specs); PIDs the simulated processes on them.
	DeviceUUIDs []string
	PIDs        []uint32
	Running     bool
}

// Start starts the kubelet. It returns once its pod informer has synced; the node's
// ResourceSlices are then deleted and plugins register, asynchronously (see
// WaitForPlugin). Stop it with Stop.
func Start(ctx context.Context, cfg Config) (*Kubelet, error) {
	return start(ctx, cfg, claimState{})
}

// Restart stops k and starts a kubelet of the same configuration in its place, as a
// kubelet restart does: the pods keep running and their claims stay prepared (the
// kubelet's checkpoint keeps them), the node's ResourceSlices are deleted, and the
// plugins register again. Use the returned kubelet from then on.
func (k *Kubelet) Restart(ctx context.Context) (*Kubelet, error) {
	k.Stop()
	k.mu.Lock()
	state := k.claimState
	k.mu.Unlock()
	return start(ctx, k.cfg, state)
}

// start starts a kubelet that takes over state, where its maps are not nil.
func start(ctx context.Context, cfg Config, state claimState) (*Kubelet, error) {
	if cfg.NodeName == "" || cfg.Client == nil || cfg.RegistrarDir == "" {
		return nil, errors.New("stand-in kubelet: NodeName, Client and RegistrarDir are required")
	}
	if cfg.SimulatorState != "" && cfg.CDIDir == "" {
		return nil, errors.New("stand-in kubelet: CDIDir is required with SimulatorState")
	}
	if cfg.ProcessMemoryMiB == 0 {
		cfg.ProcessMemoryMiB = 1024
	}
	if cfg.LeasePeriod == 0 {
		cfg.LeasePeriod = 10 * time.Second
	}
	if cfg.SliceWipeDelay == 0 {
		cfg.SliceWipeDelay = DefaultSliceWipeDelay
	}
	if state.pods == nil {
		state = claimState{pods: map[types.UID]*podState{}, claimUsers: map[types.UID]map[types.UID]bool{}, prepared: map[types.UID][]preparedDevice{}}
	}
	logger := klog.Background()
	if cfg.Logger != nil {
		logger = *cfg.Logger
	}
	logger = logger.WithValues("node", cfg.NodeName)
	ctx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	k := &Kubelet{
		cfg: cfg, logger: logger, client: cfg.Client, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "stand-in-kubelet-" + cfg.NodeName}),
		claimState: state,
		health:     map[healthKey]deviceHealth{},
		clock:      clock.RealClock{},
	}
	k.reg = newRegistry(cfg.RegistrarDir, func(f string, a ...any) { logger.Info(fmt.Sprintf(f, a...)) })
	k.reg.wipeDelay = cfg.SliceWipeDelay
	k.reg.wipe = func(driver string) { k.wipeSlices(ctx, driver) }
	// Called by the registry's goroutine, which k.wg counts.
	k.reg.onRegistered = func(p *draPlugin, health bool) {
		if health {
			k.wg.Add(1)
			go func() { defer k.wg.Done(); k.watchHealth(ctx, p) }()
		}
	}
	k.bcast = record.NewBroadcaster(record.WithContext(ctx))
	k.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
	k.recorder = k.bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	podInformer := factory.Core().V1().Pods()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, err
	}
	k.lister = podInformer.Lister()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			factory.Shutdown()
			return nil, fmt.Errorf("stand-in kubelet: informer for %v did not sync", typ)
		}
	}
	// Pods the kubelet ran before its restart may have gone meanwhile: look at each again.
	for _, st := range state.pods {
		k.queue.Add(st.key)
	}
	k.wg.Add(4)
	// As at a kubelet's start, no driver is usable until its plugin registers again: the
	// node's slices are deleted, beside the registrations (the deletion may land before
	// or after a plugin registers and publishes, as with the kubelet).
	go func() { defer k.wg.Done(); k.wipeSlices(ctx, "") }()
	go func() { defer k.wg.Done(); k.reg.run(ctx) }()
	go func() { defer k.wg.Done(); k.worker(ctx) }()
	go func() { defer k.wg.Done(); k.renewLease(ctx) }()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-ctx.Done()
		k.queue.ShutDown()
		factory.Shutdown()
	}()
	logger.Info("Stand-in kubelet started", "registrarDir", cfg.RegistrarDir)
	return k, nil
}

// Stop stops the kubelet. The pods' simulated processes keep running, like containers
// when a kubelet stops. Stopping it again does nothing.
func (k *Kubelet) Stop() {
	k.stop.Do(func() {
		k.cancel()
		k.wg.Wait()
		k.bcast.Shutdown()
	})
}

// WaitForPlugin waits until the DRA plugin of driver has registered at or after since
// (the zero time: at any time).
func (k *Kubelet) WaitForPlugin(ctx context.Context, driver string, since time.Time) error {
	return k.reg.waitFor(ctx, driver, since)
}

// Pods returns what the kubelet did for the pods it runs, by namespace/name.
func (k *Kubelet) Pods() []PodInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []PodInfo
	for _, st := range k.pods {
		ns, name, _ := strings.Cut(st.key, "/")
		pi := PodInfo{Namespace: ns, Name: name, UID: st.uid, Running: st.running,
			DeviceUUIDs: slices.Clone(st.devices), PIDs: slices.Clone(st.pids)}
		for _, c := range st.claims {
			pi.Claims = append(pi.Claims, c.namespace+"/"+c.name)
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

func (k *Kubelet) worker(ctx context.Context) {
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		retryAfter, err := k.sync(ctx, key)
		switch {
		case err != nil:
			k.logger.Info("Pod sync failed; retrying", "pod", key, "err", err)
			k.queue.AddRateLimited(key)
		case retryAfter > 0:
			k.queue.Forget(key)
			k.queue.AddAfter(key, retryAfter)
		default:
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// sync brings one pod to its state; retryAfter > 0 asks to look again later (waiting for
// the scheduler or the claim controller, not an error).
func (k *Kubelet) sync(ctx context.Context, key string) (retryAfter time.Duration, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := k.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return 0, err
	}
	// Tear down what belongs to an older pod of that name (or to a pod that is gone).
	for _, st := range k.podsByKey(key) {
		if pod == nil || st.uid != pod.UID {
			if err := k.teardown(ctx, st, nil); err != nil {
				return 0, err
			}
		}
	}
	if pod == nil {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		if st := k.podState(pod.UID); st != nil {
			if err := k.teardown(ctx, st, pod); err != nil {
				return 0, err
			}
		}
		if pod.DeletionTimestamp == nil {
			return 0, nil
		}
		// The containers are gone: let the deletion complete.
		zero := int64(0)
		err := k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("deleting pod: %w", err)
		}
		k.logger.V(2).Info("Pod deleted", "pod", key)
		return 0, nil
	}
	st := k.podState(pod.UID)
	if st != nil && st.running {
		if pod.Status.Phase != corev1.PodRunning {
			return 0, k.setRunning(ctx, pod)
		}
		return k.syncHealth(ctx, pod, st)
	}
	claims, waiting, err := k.resolveClaims(ctx, pod)
	if err != nil {
		k.recorder.Event(pod, corev1.EventTypeWarning, EventFailedPrepare, err.Error())
		return 0, err
	}
	if waiting != "" {
		k.logger.V(3).Info("Waiting before preparing", "pod", key, "for", waiting)
		return 500 * time.Millisecond, nil
	}
	if st == nil {
		st = &podState{key: key, uid: pod.UID}
		k.mu.Lock()
		k.pods[pod.UID] = st
		k.mu.Unlock()
	}
	k.mu.Lock() // Pods and the health stream read the claims
	st.claims = claims
	k.mu.Unlock()
	if err := k.prepare(ctx, pod, st); err != nil {
		k.recorder.Event(pod, corev1.EventTypeWarning, EventFailedPrepare, err.Error())
		return 0, err
	}
	if err := k.setRunning(ctx, pod); err != nil {
		return 0, err
	}
	k.mu.Lock()
	st.running = true
	k.mu.Unlock()
	devices := "no device"
	if len(st.devices) > 0 {
		devices = "devices " + strings.Join(st.devices, ",")
	}
	k.recorder.Eventf(pod, corev1.EventTypeNormal, EventStarted, "Started on %s (stand-in kubelet; %s)", k.cfg.NodeName, devices)
	return 0, nil
}

func (k *Kubelet) podsByKey(key string) []*podState {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*podState
	for _, st := range k.pods {
		if st.key == key {
			out = append(out, st)
		}
	}
	return out
}

func (k *Kubelet) podState(uid types.UID) *podState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[uid]
}

// resolveClaims returns the pod's claims once each is allocated and reserved for the pod;
// waiting names what is missing otherwise. Besides the claims of spec.resourceClaims, the
// claim kube-scheduler made for the pod's extended resources backed by a DeviceClass
// (status.extendedResourceClaimStatus) is one, as for the kubelet.
func (k *Kubelet) resolveClaims(ctx context.Context, pod *corev1.Pod) (claims []claimRef, waiting string, err error) {
	type entry struct {
		name  string
		owned bool // made for the pod: it must be controlled by it
	}
	var entries []entry
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, pc)
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			return nil, fmt.Sprintf("the claim of %q from template %s to be created", pc.Name, ptr.Deref(pc.ResourceClaimTemplateName, "")), nil
		case err != nil:
			return nil, "", err
		case name == nil:
			continue // the claim controller decided the pod needs none
		}
		entries = append(entries, entry{name: *name, owned: mustCheckOwner})
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		entries = append(entries, entry{name: st.ResourceClaimName, owned: true})
	}
	for _, e := range entries {
		name := e.name
		claim, err := k.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, "ResourceClaim " + name + " to exist", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading ResourceClaim %s: %w", name, err)
		}
		if e.owned {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				return nil, "", err
			}
		}
		if claim.Status.Allocation == nil {
			return nil, "ResourceClaim " + name + " to be allocated", nil
		}
		if !resourceclaim.IsReservedForPod(pod, claim, false) {
			return nil, "ResourceClaim " + name + " to be reserved for the pod", nil
		}
		ref := claimRef{namespace: claim.Namespace, name: claim.Name, uid: claim.UID}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if !slices.Contains(ref.drivers, r.Driver) {
				ref.drivers = append(ref.drivers, r.Driver)
			}
		}
		claims = append(claims, ref)
	}
	return claims, "", nil
}

// prepare calls NodePrepareResources for the pod's claims not prepared yet, driver by
// driver, and starts the simulated processes on the devices the containers would see
// (those of the claims prepared before too, from the claim info cache).
func (k *Kubelet) prepare(ctx context.Context, pod *corev1.Pod, st *podState) error {
	byDriver := map[string][]*drapb.Claim{}
	var drivers []string
	var cdiIDs []string
	claimDevices := map[types.UID][]preparedDevice{}
	k.mu.Lock()
	cached := map[types.UID]bool{}
	for _, c := range st.claims {
		if devs, ok := k.prepared[c.uid]; ok {
			cached[c.uid] = true
			for _, d := range devs {
				cdiIDs = append(cdiIDs, d.cdiIDs...)
			}
		}
	}
	k.mu.Unlock()
	for _, c := range st.claims {
		if cached[c.uid] {
			continue
		}
		for _, d := range c.drivers {
			if _, ok := byDriver[d]; !ok {
				drivers = append(drivers, d)
			}
			byDriver[d] = append(byDriver[d], &drapb.Claim{Namespace: c.namespace, Name: c.name, Uid: string(c.uid)})
		}
	}
	sort.Strings(drivers)
	if len(drivers) > 0 && k.cfg.HostRoot != "" {
		if err := k.writeCapabilities(); err != nil {
			return err
		}
	}
	for _, d := range drivers {
		p := k.reg.get(d)
		if p == nil {
			return fmt.Errorf("DRA driver %s is not registered on node %s", d, k.cfg.NodeName)
		}
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		resp, err := p.client.NodePrepareResources(cctx, &drapb.NodePrepareResourcesRequest{Claims: byDriver[d]})
		cancel()
		if err != nil {
			return fmt.Errorf("NodePrepareResources of driver %s: %w", d, err)
		}
		var errs []error
		for _, c := range byDriver[d] {
			r := resp.Claims[c.Uid]
			switch {
			case r == nil:
				errs = append(errs, fmt.Errorf("claim %s/%s: driver %s returned no result", c.Namespace, c.Name, d))
			case r.Error != "":
				errs = append(errs, fmt.Errorf("claim %s/%s: %s", c.Namespace, c.Name, r.Error))
			default:
				for _, dev := range r.Devices {
					cdiIDs = append(cdiIDs, dev.CdiDeviceIds...)
					claimDevices[types.UID(c.Uid)] = append(claimDevices[types.UID(c.Uid)], preparedDevice{driver: d,
						pool: dev.PoolName, device: dev.DeviceName, requests: dev.RequestNames, cdiIDs: dev.CdiDeviceIds})
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("preparing with driver %s: %w", d, err)
		}
	}
	k.mu.Lock()
	for _, c := range st.claims {
		if k.claimUsers[c.uid] == nil {
			k.claimUsers[c.uid] = map[types.UID]bool{}
		}
		k.claimUsers[c.uid][pod.UID] = true
		if !cached[c.uid] {
			k.prepared[c.uid] = claimDevices[c.uid]
		}
	}
	k.mu.Unlock()
	if k.cfg.SimulatorState == "" || len(st.pids) > 0 || len(cdiIDs) == 0 {
		return nil
	}
	uuids, err := k.visibleDevices(cdiIDs)
	if err != nil {
		return err
	}
	if pod.Labels[IdleLabel] == "true" {
		k.mu.Lock()
		st.devices = uuids
		k.mu.Unlock()
		return nil
	}
	sim, err := k.simulator()
	if err != nil {
		return err
	}
	// One process per device and container, as each container would open the device.
	var pids []uint32
	for range max(1, len(pod.Spec.Containers)) {
		for _, u := range uuids {
			pid, err := sim.StartProcess(u, k.cfg.ProcessMemoryMiB)
			if err != nil {
				for _, p := range pids {
					_ = sim.StopProcess(p)
				}
				return fmt.Errorf("starting the container process on %s: %w", u, err)
			}
			pids = append(pids, pid)
		}
	}
	k.mu.Lock()
	st.pids, st.devices = pids, uuids
	k.mu.Unlock()
	return nil
}

// visibleDevices returns the device UUIDs the CDI devices ids name to the NVIDIA
// container toolkit: those of their device list mounts (plugin.DeviceListMountRoot) where
// they carry any, as a toolkit that accepts them reads them first; otherwise the
// NVIDIA_VISIBLE_DEVICES values they set.
func (k *Kubelet) visibleDevices(ids []string) ([]string, error) {
	c, err := cdiapi.NewCache(cdiapi.WithSpecDirs(k.cfg.CDIDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("reading CDI specs: %w", err)
	}
	_ = c.Refresh() // errors are per spec; a missing device is reported below
	var out, mounted []string
	for _, id := range ids {
		dev := c.GetDevice(id)
		if dev == nil {
			return nil, fmt.Errorf("CDI device %s not found in %s", id, k.cfg.CDIDir)
		}
		mounts := append(slices.Clone(dev.GetSpec().ContainerEdits.Mounts), dev.ContainerEdits.Mounts...)
		for _, m := range mounts {
			if filepath.Clean(m.HostPath) != "/dev/null" {
				continue
			}
			if u, ok := strings.CutPrefix(filepath.Clean(m.ContainerPath), plugin.DeviceListMountRoot+"/"); ok && !slices.Contains(mounted, u) {
				mounted = append(mounted, u)
			}
		}
		env := append(slices.Clone(dev.GetSpec().ContainerEdits.Env), dev.ContainerEdits.Env...)
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, plugin.VisibleDevicesEnv+"="); ok {
				for _, u := range strings.Split(v, ",") {
					if u != "" && !slices.Contains(out, u) {
						out = append(out, u)
					}
				}
			}
		}
	}
	if len(mounted) > 0 {
		return mounted, nil
	}
	return out, nil
}

// simulator opens the simulator state once it exists (the agent creates it).
func (k *Kubelet) simulator() (*nvmlsim.Sim, error) {
	k.simMu.Lock()
	defer k.simMu.Unlock()
	if k.sim == nil {
		sim, err := nvmlsim.OpenState(k.cfg.SimulatorState)
		if err != nil {
			return nil, err
		}
		k.sim = sim
	}
	return k.sim, nil
}

// writeCapabilities writes the MIG capability files of every MIG device in the simulator.
func (k *Kubelet) writeCapabilities() error {
	if k.cfg.SimulatorState == "" {
		return nil
	}
	sim, err := k.simulator()
	if err != nil {
		return err
	}
	for _, g := range sim.Snapshot().GPUs {
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if err := plugin.WriteFakeCapabilities(k.cfg.HostRoot, g.Minor, gpu.MIGDevice{GIID: gi.ID, CIID: ci.ID}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// teardown stops the pod's processes and unprepares the claims no other pod of this node
// uses. pod is nil when the pod is gone.
func (k *Kubelet) teardown(ctx context.Context, st *podState, pod *corev1.Pod) error {
	if len(st.pids) > 0 {
		sim, err := k.simulator()
		if err != nil {
			return err
		}
		for _, pid := range st.pids {
			if err := sim.StopProcess(pid); err != nil && !errors.Is(err, nvml.ERROR_NOT_FOUND) {
				return err
			}
		}
		k.mu.Lock()
		st.pids = nil
		st.running = false
		k.mu.Unlock()
	}
	byDriver := map[string][]*drapb.Claim{}
	k.mu.Lock()
	for _, c := range st.claims {
		users := k.claimUsers[c.uid]
		delete(users, st.uid)
		if len(users) > 0 {
			continue
		}
		for _, d := range c.drivers {
			byDriver[d] = append(byDriver[d], &drapb.Claim{Namespace: c.namespace, Name: c.name, Uid: string(c.uid)})
		}
	}
	k.mu.Unlock()
	var errs []error
	for d, claims := range byDriver {
		p := k.reg.get(d)
		if p == nil {
			errs = append(errs, fmt.Errorf("DRA driver %s is not registered on node %s", d, k.cfg.NodeName))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		resp, err := p.client.NodeUnprepareResources(cctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("NodeUnprepareResources of driver %s: %w", d, err))
			continue
		}
		for _, c := range claims {
			if r := resp.Claims[c.Uid]; r != nil && r.Error != "" {
				errs = append(errs, fmt.Errorf("unpreparing claim %s/%s: %s", c.Namespace, c.Name, r.Error))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Keep the claims recorded as used by this pod, so that the retry unprepares them.
		k.mu.Lock()
		for _, c := range st.claims {
			if k.claimUsers[c.uid] == nil {
				k.claimUsers[c.uid] = map[types.UID]bool{}
			}
			k.claimUsers[c.uid][st.uid] = true
		}
		k.mu.Unlock()
		if pod != nil {
			k.recorder.Event(pod, corev1.EventTypeWarning, EventFailedUnprepare, err.Error())
		}
		return err
	}
	k.mu.Lock()
	for _, c := range st.claims {
		if len(k.claimUsers[c.uid]) == 0 {
			delete(k.claimUsers, c.uid)
			delete(k.prepared, c.uid)
		}
	}
	delete(k.pods, st.uid)
	k.mu.Unlock()
	k.logger.V(2).Info("Pod torn down", "pod", st.key, "claims", len(st.claims))
	return nil
}

// setRunning writes the status a kubelet writes once every container runs.
func (k *Kubelet) setRunning(ctx context.Context, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			return nil
		}
		now := metav1.Now()
		s := &cur.Status
		s.Phase = corev1.PodRunning
		s.HostIP = "127.0.0.1"
		s.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		if s.StartTime == nil {
			s.StartTime = &now
		}
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setCondition(s, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		s.InitContainerStatuses = nil
		for _, c := range cur.Spec.InitContainers {
			s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "stand-in://" + c.Image,
				ContainerID: "stand-in://" + string(cur.UID) + "/" + c.Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
			})
		}
		s.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "stand-in://" + c.Image,
				ContainerID: "stand-in://" + string(cur.UID) + "/" + c.Name,
				Ready:       true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = k.client.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func setCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			if s.Conditions[i].Status != c.Status {
				s.Conditions[i] = c
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}

// renewLease keeps the node's Lease in kube-node-lease fresh, as a kubelet does: with
// component-helpers' lease controller, the Lease held for 40 s, renewed every LeasePeriod,
// owned by the Node once it can be read.
func (k *Kubelet) renewLease(ctx context.Context) {
	if k.cfg.LeasePeriod < 0 {
		return
	}
	owner := func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) > 0 {
			return nil
		}
		node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			k.logger.V(2).Info("Renewing the node lease without owner", "err", err)
			return nil
		}
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		return nil
	}
	lease.NewController(clock.RealClock{}, k.client, k.cfg.NodeName, 40, nil, k.cfg.LeasePeriod,
		k.cfg.NodeName, corev1.NamespaceNodeLease, owner).Run(ctx)
}
