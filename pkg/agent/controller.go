package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/pkg/mig"
)

// NodeReconciler drives the Repartitioner from the node's NodeMigLayout: it
// reconciles when the spec changes, when a ResourceClaim of the node changes
// (a Blocked GPU may be free now), and periodically; it writes the result to
// the NodeMigLayout status and records events.
type NodeReconciler struct {
	Client client.Client
	// APIReader reads the NodeMigLayout from the API server after a status
	// write's conflict, and before the status of a pass that showed a GPU
	// in flight (the cache may not show the agent's own last write yet);
	// nil reads through Client.
	APIReader     client.Reader
	NodeName      string
	Repartitioner *Repartitioner
	// Recorder records events; SetupWithManager wraps it in
	// eventnote.Distinct, so that an event with a new note is never folded into
	// the series of an earlier one.
	Recorder events.EventRecorder
	// Resync is the period of reconciles without a trigger (NVML truth can
	// change behind the agent's back, e.g. a GPU reset); the first comes at
	// start. Default 1 minute.
	Resync time.Duration
	// MaxPass is how long one pass may run before Healthz fails: a pass
	// stuck in an NVML call or an API request that never returns. The
	// kubelet's liveness probe then restarts the agent, which resumes from
	// its journal (the heartbeat Lease alone would go on being renewed).
	// Default 10 minutes.
	MaxPass time.Duration
	// Now is the clock of Healthz; nil means time.Now.
	Now func() time.Time

	// republish holds one pending Republish (republishChan).
	republish     chan struct{}
	republishOnce sync.Once
	// setAsideTold is set once the journal set aside at the start was
	// told (tellJournalSetAside).
	setAsideTold atomic.Bool

	mu sync.Mutex
	// failing backs off passes that end with a GPU failed; waiting, those
	// that end with GPUs only Blocked or Pending (see nextBackoff).
	failing, waiting retryBackoff
	// retryDue holds the GPUs whose change failed, by index, until their
	// retry (deferredGPUs), for the NodeMigLayout of UID retryDueUID.
	retryDue    map[int]failedRetry
	retryDueUID types.UID
	// changedFor holds, by GPU index, the spec (specKey) a pass that then
	// failed (or whose status write failed) changed the GPU to
	// (rememberChanged): its row says the change was made only while it is
	// still that GPU's spec. Cleared once a pass's status is written.
	changedFor map[int]string
	// stuckFor holds, by GPU index, the spec (specKey) of each GPU the last
	// pass left Blocked or Failed, for the NodeMigLayout of UID
	// stuckForUID (retryOfStuck).
	stuckFor    map[int]string
	stuckForUID types.UID
	// catalogTold is the CatalogDiffers message last recorded per GPU UUID.
	catalogTold map[string]string
	// toldUnlisted holds, by GPU index, the phase and reason last told of
	// each GPU the last pass had a result for, for the NodeMigLayout of UID
	// toldUnlistedUID: read for the GPUs the status does not list (over
	// the rows it holds), so that their events are not told every pass.
	toldUnlisted    map[int32][2]string
	toldUnlistedUID types.UID
	// passStart is when the pass in progress started; zero between passes.
	passStart time.Time
	// written is the status this agent last wrote, on the NodeMigLayout
	// of UID writtenUID; writtenOver the resourceVersions its recent
	// writes replaced (latestStatus).
	written     *v1alpha1.NodeMigLayoutStatus
	writtenUID  types.UID
	writtenOver []string
	// AllowDevicePlugin turns off the check for NVIDIA's device plugin
	// (checkNode): the node's GPUs are published and changed whatever
	// extended resources its kubelet advertises.
	AllowDevicePlugin bool
	// XidMarks, when set, clears the kubelet plugin's Xid marks on the
	// requests of the Node's annotation v1alpha1.AnnotationClearXids
	// (applyClearXids; the *plugin.Plugin).
	XidMarks XidMarks
	// clearXidsTold is the last AnnotationClearXids value refused.
	clearXidsTold string
	// OnNodeReplaced is called where the node's Node was deleted and made
	// again under its name while the agent ran (checkNode): the kubelet
	// plugin's ResourceSlices name the old Node as their owner, so the
	// garbage collector would delete them again and again. The agent's
	// main stops the process (the DaemonSet starts it again).
	OnNodeReplaced func(error)
	// nodeUID is the UID of the node's Node as checkNode first read it.
	nodeUID types.UID
	// published is set once a pass has published the node's pool (Readyz).
	published atomic.Bool
	// wake holds one pending Wake (buffered, capacity 1); see wakeChan.
	wake     chan struct{}
	wakeOnce sync.Once
}

// +kubebuilder:rbac:groups=miglayout.io,resources=nodemiglayouts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=miglayout.io,resources=nodemiglayouts/status,verbs=update
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. Only the NodeMigLayout named
// after the node is watched; every ResourceClaim change of the node's pool
// maps to it, and so does a deletion that leaves the node's pool without a
// ResourceSlice (wipedToNode), which the republisher also publishes again
// at once; and a ticker reconciles at start, every
// Resync and on Wake, so that a node no MigLayout selects still publishes its pool, NVML
// changes made behind the agent's back are seen, and a device the kubelet
// plugin releases is taken into account at once.
func (r *NodeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Recorder = eventnote.Distinct(r.Recorder)
	ticks := make(chan event.GenericEvent)
	if err := mgr.Add(manager.RunnableFunc(r.tick(ticks))); err != nil {
		return fmt.Errorf("adding the resync ticker: %w", err)
	}
	if rp, ok := r.Repartitioner.Inventory.(Republisher); ok {
		if err := mgr.Add(manager.RunnableFunc(r.republisher(rp))); err != nil {
			return fmt.Errorf("adding the republisher: %w", err)
		}
	}
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.NodeName })
	toNode := handler.EnqueueRequestsFromMapFunc(r.claimToNode)
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodemiglayout-agent").
		For(&v1alpha1.NodeMigLayout{}, builder.WithPredicates(mine, predicate.GenerationChangedPredicate{})).
		Watches(&resourceapi.ResourceClaim{}, toNode).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToNode), builder.WithPredicates(mine, nodeChanged)).
		Watches(&resourceapi.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(r.wipedToNode), builder.WithPredicates(sliceDeleted)).
		WatchesRawSource(source.Channel(ticks, &handler.EnqueueRequestForObject{})).
		WithOptions(ctrlOptions()).
		Complete(r)
}

// claimToNode maps a ResourceClaim event to a pass of this node's
// NodeMigLayout where the claim's allocation holds a device of this node's
// pool (its release may unblock a GPU), and to nothing otherwise.
func (r *NodeReconciler) claimToNode(_ context.Context, o client.Object) []reconcile.Request {
	claim, ok := o.(*resourceapi.ResourceClaim)
	if !ok || AllocatedIn([]resourceapi.ResourceClaim{*claim}, r.Repartitioner.driver(), r.NodeName).Len() == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.NodeName}}}
}

// tick returns the runnable that sends the node's NodeMigLayout to ticks at
// start, then after every Resync or Wake, until its context ends.
func (r *NodeReconciler) tick(ticks chan<- event.GenericEvent) func(context.Context) error {
	node := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}
	wake := r.wakeChan()
	return func(ctx context.Context) error {
		t := time.NewTicker(r.resync())
		defer t.Stop()
		for {
			select {
			case ticks <- event.GenericEvent{Object: node}:
			case <-ctx.Done():
				return nil
			}
			select {
			case <-t.C:
			case <-wake:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// Wake asks for a pass soon, without waiting for a watch event or the next
// Resync: the kubelet plugin calls it once it has unprepared a claim, since
// a GPU Blocked only by that claim's prepared devices may change now (the
// claim's deallocation may have been seen before the kubelet unprepared it).
// It never blocks; wakes while one is pending make one pass.
func (r *NodeReconciler) Wake() {
	select {
	case r.wakeChan() <- struct{}{}:
	default:
	}
}

func (r *NodeReconciler) wakeChan() chan struct{} {
	r.wakeOnce.Do(func() { r.wake = make(chan struct{}, 1) })
	return r.wake
}

// Readyz is the agent's readiness check: ready once a pass has published
// the node's pool (and so its devices and drain taints), not before, so a
// DaemonSet rollout waits for an agent that can publish. (The agent's
// /readyz also waits for the kubelet's registration of its DRA plugin:
// plugin.KubeletRegistration.)
func (r *NodeReconciler) Readyz(*http.Request) error {
	if !r.published.Load() {
		return errors.New("the node's pool has not been published yet")
	}
	return nil
}

// Reconcile runs one Sync pass for the node and records its outcome.
func (r *NodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	r.passStart = r.now()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.passStart = time.Time{}
		r.mu.Unlock()
	}()
	logger := klog.FromContext(ctx).WithValues("node", r.NodeName)
	ctx = klog.NewContext(ctx, logger)
	withhold, err := r.checkNode(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Whatever the pass does next (withheld, no NodeMigLayout, ...).
	r.tellJournalSetAside(ctx)
	var nml v1alpha1.NodeMigLayout
	err = r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &nml)
	if apierrors.IsNotFound(err) && withhold != "" {
		if _, err := r.Repartitioner.Withhold(ctx, withhold); err != nil {
			return ctrl.Result{}, fmt.Errorf("publishing the node's inventory: %w", err)
		}
		r.published.Store(true)
		r.resetBackoff()
		return ctrl.Result{}, nil
	}
	if apierrors.IsNotFound(err) {
		// No MigLayout manages this node: keep the pool published as it is.
		res, err := r.Repartitioner.Sync(ctx, nil, nil)
		r.tellEmptied(ctx, r.Repartitioner.takeEmptied())
		if err != nil {
			r.resetBackoff()
			if ctx.Err() == nil {
				r.Repartitioner.Metrics.countFailedPass()
			}
			return ctrl.Result{}, fmt.Errorf("publishing the node's inventory: %w", err)
		}
		r.published.Store(true)
		r.pruneXids(ctx, res.GPUs)
		if res.Retry {
			// A GPU instance left half made that could not be rolled
			// back, a pending MIG mode change that could not be
			// cancelled, a GPU NVML cannot read: tried again with the
			// backoff, not only at the next resync.
			d := r.retryAfter(nil, res, nil)
			logger.V(1).Info("Retrying after backoff", "after", d)
			return ctrl.Result{RequeueAfter: d}, nil
		}
		r.resetBackoff()
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading NodeMigLayout %s: %w", r.NodeName, err)
	}
	r.latestStatus(&nml)
	var shown []int  // GPUs whose status this pass showed in flight
	var hidden []int // retries of Blocked or Failed GPUs whose drain it did not show
	// The journal as the last pass left it (this pass records its own
	// entries before it drains).
	var journaled []JournalEntry
	if r.Repartitioner != nil && r.Repartitioner.Journal != nil {
		journaled = r.Repartitioner.Journal.Entries()
	}
	report := func(idx int, res GPUResult) error {
		if !showProgress(nml.Status.GPUs, idx, res) {
			logger.V(2).Info("Trying again quietly", "gpu", idx, "phase", res.Phase)
			return nil
		}
		if res.Phase == v1alpha1.PhaseDraining && r.retryOfStuck(&nml, idx, journaled) {
			logger.V(2).Info("Retrying a Blocked or Failed GPU; its drain is not shown", "gpu", idx)
			hidden = append(hidden, idx)
			return nil
		}
		if res.Phase == v1alpha1.PhaseDraining {
			r.gpuEvent(&nml, "Normal", EventDraining, "Drain", idx, res.Message)
		}
		if err := r.patchGPUPhase(ctx, specOf(&nml), idx, res); err != nil {
			return fmt.Errorf("reporting GPU %d %s: %w", idx, res.Phase, err)
		}
		shown = append(shown, idx)
		return nil
	}
	deferred := r.deferredGPUs(&nml)
	if len(deferred) > 0 {
		logger.V(1).Info("Leaving GPUs whose change failed until their retry is due", "gpus", slices.Sorted(maps.Keys(deferred)))
	}
	var res *SyncResult
	if withhold != "" {
		res, err = r.Repartitioner.Withhold(ctx, withhold)
	} else {
		res, err = r.Repartitioner.SyncDeferring(ctx, nml.Spec.GPUs, deferred, report)
	}
	r.tellEmptied(ctx, r.Repartitioner.takeEmptied())
	if err == nil {
		r.published.Store(true)
	}
	if err != nil && ctx.Err() != nil {
		// Stopping: no warning for it; the journal has the work, and the
		// next start takes it up.
		logger.Info("Pass stopped: the agent is stopping", "err", err)
		return ctrl.Result{}, err
	}
	if err != nil {
		r.Repartitioner.Metrics.countFailedPass()
		// A retry whose drain was not shown says why the pass failed too,
		// rather than the Blocked or Failed reason it retried.
		r.reportFailedPass(ctx, &nml, res, err, append(shown, hidden...))
		return ctrl.Result{}, err
	}
	// What status said before this pass: a GPU that was Ready on another
	// layout (the pass drained and repartitioned it without status
	// showing it in between) is repartitioned all the same.
	before := map[int32]v1alpha1.GPUPhase{}
	beforeReason := map[int32]string{}
	held := map[int32]string{}
	for _, g := range nml.Status.GPUs {
		before[g.Index], beforeReason[g.Index] = g.Phase, g.Reason
		if g.Phase == v1alpha1.PhaseFailed && (g.Reason == v1alpha1.ReasonGPUUnreadable || g.Reason == v1alpha1.ReasonGPUMissing) {
			// A row NVML could not fill (the GPU off the bus, or not
			// counted): it tells nothing of the layout the GPU holds, so
			// a GPU back on its layout was not repartitioned.
			continue
		}
		held[g.Index] = g.Layout
		if !g.MIGEnabled {
			held[g.Index] = "-"
		}
	}
	r.mu.Lock()
	if r.toldUnlistedUID == nml.UID {
		for idx, pr := range r.toldUnlisted {
			if _, ok := before[idx]; !ok {
				before[idx], beforeReason[idx] = v1alpha1.GPUPhase(pr[0]), pr[1]
			}
		}
	}
	r.mu.Unlock()
	r.tellCatalogDiffers(&nml, res.GPUs)
	r.pruneXids(ctx, res.GPUs)
	if err := r.writeStatus(ctx, specOf(&nml), res, len(shown) > 0); err != nil {
		// Should the next pass fail too, the rows of the GPUs this one
		// changed say their change was made, not that it stopped.
		r.rememberChanged(&nml, res.Changed)
		return ctrl.Result{}, err
	}
	// The pass's outcome is published: no row needs to say a change was
	// made any more.
	r.mu.Lock()
	r.changedFor = nil
	r.mu.Unlock()
	told := func(idx int32, got GPUResult) bool {
		return got.Phase == before[idx] && got.Reason == beforeReason[idx] && got.Phase != v1alpha1.PhaseReady
	}
	// A GPU no spec lists (Auto mode lists only those a plan changed) is
	// told of only when its devices leave the pool: NVML cannot read it,
	// or NVIDIA's device plugin hands the node's GPUs out.
	for idx, got := range res.Results {
		listed := slices.ContainsFunc(nml.Spec.GPUs, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == idx })
		if !listed && got.Reason == v1alpha1.ReasonGPUUnreadable && !told(int32(idx), got) {
			r.gpuEvent(&nml, "Warning", EventGPUUnreadable, "Repartition", idx, got.Message)
		}
		if !listed && got.Reason == v1alpha1.ReasonDevicePluginActive && !told(int32(idx), got) {
			r.gpuEvent(&nml, "Warning", EventDevicePluginActive, "Repartition", idx, got.Message)
		}
	}
	r.rememberStuck(&nml, res)
	for _, spec := range nml.Spec.GPUs {
		got := res.Results[int(spec.Index)]
		if told(spec.Index, got) {
			continue // already reported, phase and reason
		}
		switch got.Phase {
		case v1alpha1.PhaseReady:
			// Told once the GPU is changed: by this pass, or behind the
			// status's back (an earlier pass whose status was not
			// written). A GPU found on its desired layout (a spec changed
			// and changed back before the agent acted, a node first seen)
			// was not repartitioned.
			prev, known := held[spec.Index]
			if res.Changed.Has(int(spec.Index)) || known && prev != heldNow(res, int(spec.Index)) {
				r.Recorder.Eventf(&nml, nil, "Normal", EventRepartitioned, gpuAction("Repartition", int(spec.Index)), "%s", heldNote(spec))
			}
		case v1alpha1.PhaseBlocked:
			r.gpuEvent(&nml, "Warning", EventBlocked, "Repartition", int(spec.Index), got.Message)
		case v1alpha1.PhaseFailed:
			reason := EventNVMLError
			switch got.Reason {
			case v1alpha1.ReasonInvalidLayout, v1alpha1.ReasonUnknownGPU:
				reason = EventInvalidLayout
			case v1alpha1.ReasonGPUUnreadable:
				reason = EventGPUUnreadable
			case v1alpha1.ReasonGPUMissing:
				reason = EventGPUMissing
			case ReasonJournalUnwritable:
				reason = EventJournalUnwritable
			case v1alpha1.ReasonDevicePluginActive:
				reason = EventDevicePluginActive
			case v1alpha1.ReasonDeviceTaintsUnsupported:
				reason = EventDeviceTaintsUnsupported
			}
			r.gpuEvent(&nml, "Warning", reason, "Repartition", int(spec.Index), got.Message)
		case v1alpha1.PhasePending:
			if got.Reason == ReasonPassFailed {
				// The change stopped on an error that is not NVML's
				// (the API server could not be read).
				logger.Info("GPU change stopped; retrying", "gpu", spec.Index, "why", got.Message)
				r.gpuEvent(&nml, "Warning", EventPassFailed, "Repartition", int(spec.Index), got.Message)
			}
		}
	}
	r.mu.Lock()
	r.toldUnlisted, r.toldUnlistedUID = make(map[int32][2]string, len(res.Results)), nml.UID
	for idx, got := range res.Results {
		r.toldUnlisted[int32(idx)] = [2]string{string(got.Phase), got.Reason}
	}
	r.mu.Unlock()
	if res.Retry {
		d := r.retryAfter(nml.Spec.GPUs, res, deferred)
		logger.V(1).Info("Retrying after backoff", "after", d)
		return ctrl.Result{RequeueAfter: d}, nil
	}
	r.resetBackoff()
	return ctrl.Result{}, nil
}

// tellCatalogDiffers records a CatalogDiffers event for each GPU whose NVML
// profile table differs from the catalog (values: Normal; IDs or
// placements: Warning), once per GPU and difference in this
// process (not judged on the status read back: an API server whose CRD
// predates status.gpus[].nvmlProfiles drops them).
func (r *NodeReconciler) tellCatalogDiffers(nml *v1alpha1.NodeMigLayout, gpus []GPUState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range gpus {
		if len(g.GPU.ProfileValues) == 0 && len(g.GPU.CatalogMismatches) == 0 {
			continue
		}
		msg := describeCatalogDiffers(g.GPU)
		if r.catalogTold[g.GPU.UUID] == msg {
			continue
		}
		if r.catalogTold == nil {
			r.catalogTold = map[string]string{}
		}
		r.catalogTold[g.GPU.UUID] = msg
		eventType := "Normal"
		if len(g.GPU.CatalogMismatches) > 0 {
			eventType = "Warning" // layouts may fail, not only look otherwise
		}
		r.gpuEvent(nml, eventType, EventCatalogDiffers, "Inventory", g.GPU.Index, msg)
	}
}

// gpuEvent records an event about GPU idx on nml, "GPU <idx>: <msg>", cut to
// the 1 kB an Event's note may hold, with the GPU's own action (gpuAction;
// the recorder, eventnote.Distinct, appends a hash of the note).
func (r *NodeReconciler) gpuEvent(nml *v1alpha1.NodeMigLayout, eventType, reason, action string, idx int, msg string) {
	note := truncate(fmt.Sprintf("GPU %d: %s", idx, msg), maxEventNote)
	r.Recorder.Eventf(nml, nil, eventType, reason, gpuAction(action, idx), "%s", note)
}

// gpuAction is the events.k8s.io action of an event about GPU idx
// ("RepartitionGPU1"). The event recorder counts an event whose type,
// reason, action, regarding and related objects match one recorded in the
// last minutes as a repeat of it (Event.series) and drops its note: with
// one action for every GPU, GPU 1's event in the pass that also told of
// GPU 0 would be lost.
func gpuAction(action string, idx int) string { return fmt.Sprintf("%sGPU%d", action, idx) }

// showProgress reports whether an in-flight phase is worth showing in status
// and an event. A retry of a GPU that failed because the API server drops
// drain taints (DeviceTaintsUnsupported) is not: the drain publication
// fails at once again until DRA device taints are turned on, and showing
// Draining each time would move the GPU's lastTransitionTime and record a
// Draining event on every retry of a GPU that never changes. Once taints
// are served the GPU shows Repartitioning, then Ready. Nor is a retry of a
// pass that failed as a whole (PassFailed), for the same reason.
func showProgress(status []v1alpha1.GPUStatus, idx int, res GPUResult) bool {
	if res.Phase != v1alpha1.PhaseDraining {
		return true
	}
	for _, g := range status {
		if int(g.Index) == idx {
			return (g.Phase != v1alpha1.PhaseFailed || g.Reason != v1alpha1.ReasonDeviceTaintsUnsupported) &&
				(g.Phase != v1alpha1.PhasePending || g.Reason != ReasonPassFailed)
		}
	}
	return true
}

// retryOfStuck reports whether a pass on nml works on GPU idx again after
// reporting it Blocked or Failed on the spec nml asks for now (its MIG
// mode and layout, remembered by rememberStuck; an agent that has not
// reported the GPU since it started takes a status.observedGeneration
// equal to the spec's generation, else the layout of the GPU's journal
// entry as the last pass left it, for it): a retry. Its drain is shown
// neither in status nor in an event: the GPU stays Blocked or Failed until
// the retry repartitions it. A GPU another NVML client holds is retried
// for as long as it holds it, every 2 minutes at most, and one whose
// change stopped part way holds some devices of each layout: shown
// Draining, the MigLayout's conditions would flap with each retry, and
// the controller would take the GPU for one nothing was destroyed on yet,
// whose change a conflict, a pause or an Auto plan may drop.
func (r *NodeReconciler) retryOfStuck(nml *v1alpha1.NodeMigLayout, idx int, journaled []JournalEntry) bool {
	i := slices.IndexFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return int(g.Index) == idx })
	j := slices.IndexFunc(nml.Spec.GPUs, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == idx })
	if i < 0 || j < 0 {
		return false
	}
	if ph := nml.Status.GPUs[i].Phase; ph != v1alpha1.PhaseBlocked && ph != v1alpha1.PhaseFailed {
		return false
	}
	if nml.Status.GPUs[i].Reason == v1alpha1.ReasonSpecForAnotherGPU {
		// Nothing was tried under another GPU's entry: the one written
		// for this GPU, whatever its layout, is a first try.
		return false
	}
	r.mu.Lock()
	key, known := r.stuckFor[idx]
	known = known && r.stuckForUID == nml.UID
	r.mu.Unlock()
	if known {
		return key == specKey(nml.Spec.GPUs[j])
	}
	if nml.Status.ObservedGeneration == nml.Generation {
		return true // the row is the outcome of this spec
	}
	// A spec edited since (a new reason, or another GPU's change): a GPU
	// Blocked, or whose change failed on an error that may pass, keeps its
	// journal entry (journaled: as the last pass left it), whose desired
	// layout is the one it was left so on. MIG off and MIG on without a
	// device record the same (none), and are not told apart so.
	spec := nml.Spec.GPUs[j]
	l, err := mig.ParseLayout(spec.Layout)
	if !spec.MIGEnabled || err != nil || len(l) == 0 {
		return false
	}
	for _, e := range journaled {
		if e.GPU == idx && e.UUID == nml.Status.GPUs[i].UUID {
			return e.Desired == l.String()
		}
	}
	return false
}

// rememberStuck records, by GPU index, the spec (specKey) of each GPU of
// nml's spec the pass res left Blocked or Failed (retryOfStuck), and
// forgets the others.
func (r *NodeReconciler) rememberStuck(nml *v1alpha1.NodeMigLayout, res *SyncResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stuckForUID != nml.UID {
		r.stuckFor, r.stuckForUID = nil, nml.UID
	}
	kept := map[int]string{}
	for _, s := range nml.Spec.GPUs {
		if g, ok := res.Results[int(s.Index)]; ok && (g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed) {
			kept[int(s.Index)] = specKey(s)
		}
	}
	r.stuckFor = kept
}

// actedOn names the spec a pass acted on: its NodeMigLayout's UID and
// generation.
type actedOn struct {
	uid        types.UID // empty: any object of the node's name
	generation int64
}

// specOf returns the spec of nml as a pass acts on it.
func specOf(nml *v1alpha1.NodeMigLayout) actedOn {
	return actedOn{uid: nml.UID, generation: nml.Generation}
}

// replaced reports whether nml, read for a status write, is another object
// than the one the pass acted on: the NodeMigLayout was deleted and made
// again during the pass. Its status is left to the pass of its own spec
// (its creation queues one): the outcome of the old spec, and the old
// generation as observedGeneration, would say a spec the agent has not
// acted on is done.
func (a actedOn) replaced(ctx context.Context, nml *v1alpha1.NodeMigLayout) bool {
	if a.uid == "" || nml.UID == a.uid {
		return false
	}
	klog.FromContext(ctx).V(1).Info("Not writing status: the NodeMigLayout was made again during the pass",
		"actedOnUID", a.uid, "uid", nml.UID)
	return true
}

// errNodeMigLayoutReplaced: the node's NodeMigLayout was deleted and made
// again since the pass read it (patchGPUPhase).
var errNodeMigLayoutReplaced = errors.New("the NodeMigLayout was made again during the pass")

// writeStatus records res, the outcome of the spec acted on (its
// generation, not the object's generation now: a spec changed during the
// pass is not done yet). It writes nothing to a NodeMigLayout made again
// under the node's name since (actedOn.replaced).
//
// A status the API server holds already is not written again. Where the
// pass showed a GPU in flight (patched: patchGPUPhase wrote the row), the
// NodeMigLayout is read from the API server first: the cache may not show
// that write yet, and a status equal to the cache's would then leave the
// in-flight row standing.
func (r *NodeReconciler) writeStatus(ctx context.Context, spec actedOn, res *SyncResult, patched bool) error {
	read := r.statusReader(patched)
	if res != nil {
		res.Xids = r.gpuXids(res)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var nml v1alpha1.NodeMigLayout
		if err := read(ctx, &nml); err != nil {
			return err
		}
		if spec.replaced(ctx, &nml) {
			return nil
		}
		st := BuildStatus(nml.Status, spec.generation, res, metav1.Now())
		if equality.Semantic.DeepEqual(st, nml.Status) {
			return nil // as written already: no request (a resync of a steady node)
		}
		nml.Status = st
		return r.updateStatus(ctx, &nml)
	})
}

// updateStatus writes nml's status, and records it as the one this agent
// last wrote (latestStatus).
func (r *NodeReconciler) updateStatus(ctx context.Context, nml *v1alpha1.NodeMigLayout) error {
	over := nml.ResourceVersion
	if err := r.Client.Status().Update(ctx, nml); err != nil {
		return err
	}
	r.wrote(nml, over)
	return nil
}

// wrote records nml's status as the one this agent last wrote, over the
// object of resourceVersion over.
func (r *NodeReconciler) wrote(nml *v1alpha1.NodeMigLayout, over string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writtenUID != nml.UID {
		r.writtenOver = nil
	}
	r.written, r.writtenUID = nml.Status.DeepCopy(), nml.UID
	r.writtenOver = append(r.writtenOver, over)
	if len(r.writtenOver) > maxWrittenOver {
		r.writtenOver = slices.Delete(r.writtenOver, 0, len(r.writtenOver)-maxWrittenOver)
	}
}

// maxWrittenOver is how many of the resourceVersions its writes replaced
// the agent remembers: those of a few passes, as far as a cache lags.
const maxWrittenOver = 16

// latestStatus sets nml's status (as read from the cache) to the one this
// agent last wrote, where nml is an object that write replaced: the cache
// is behind (a pass following a write by tens of milliseconds, a claim
// prepared meanwhile). Read from the cache, the phases a pass compares its
// outcome with (to tell a GPU repartitioned or blocked once) would be those
// before the write, and the events of the last pass told again. Any other
// object (the write's own, a later one, one a write whose answer was lost
// made) is taken as read.
func (r *NodeReconciler) latestStatus(nml *v1alpha1.NodeMigLayout) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written != nil && r.writtenUID == nml.UID && slices.Contains(r.writtenOver, nml.ResourceVersion) {
		nml.Status = *r.written.DeepCopy()
	}
}

// statusReader returns the read of one status write: the node's
// NodeMigLayout from the cache first (from the API server with live), from
// the API server (APIReader) on each try after a conflict.
func (r *NodeReconciler) statusReader(live bool) func(context.Context, *v1alpha1.NodeMigLayout) error {
	first := true
	return func(ctx context.Context, nml *v1alpha1.NodeMigLayout) error {
		var from client.Reader = r.Client
		if (live || !first) && r.APIReader != nil {
			from = r.APIReader
		}
		first = false
		return from.Get(ctx, types.NamespacedName{Name: r.NodeName}, nml)
	}
}

// patchGPUPhase shows an in-flight phase (Draining, Repartitioning, or
// Pending where the pass failed) of GPU idx in status, and Ready False for
// it: a node whose spec (the one the pass acts on) is not done yet is not
// Ready. Like writeStatus, it writes nothing to a NodeMigLayout made again
// since, and fails then (errNodeMigLayoutReplaced): a GPU not shown
// Repartitioning gets no NVML work this pass; the new object's pass shows
// and does it.
func (r *NodeReconciler) patchGPUPhase(ctx context.Context, spec actedOn, idx int, res GPUResult) error {
	read := r.statusReader(false)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var nml v1alpha1.NodeMigLayout
		if err := read(ctx, &nml); err != nil {
			return err
		}
		if spec.replaced(ctx, &nml) {
			return errNodeMigLayoutReplaced
		}
		now := metav1.Now()
		found := false
		for i := range nml.Status.GPUs {
			g := &nml.Status.GPUs[i]
			if int(g.Index) != idx {
				continue
			}
			found = true
			if g.Phase != res.Phase {
				g.LastTransitionTime = &now
			}
			g.Phase, g.Reason, g.Message = res.Phase, res.Reason, truncate(res.Message, 1024)
		}
		if !found {
			nml.Status.GPUs = append(nml.Status.GPUs, v1alpha1.GPUStatus{Index: int32(idx), Phase: res.Phase, Reason: res.Reason, Message: truncate(res.Message, 1024), LastTransitionTime: &now})
		}
		if res.Phase != v1alpha1.PhaseReady {
			meta.SetStatusCondition(&nml.Status.Conditions, notReadyCondition(nml.Status.GPUs, nil, spec.generation))
		}
		return r.updateStatus(ctx, &nml)
	})
}

// Healthz is a healthz.Checker (the agent's /healthz): it fails while a
// pass has been running longer than MaxPass.
func (r *NodeReconciler) Healthz(*http.Request) error {
	r.mu.Lock()
	start := r.passStart
	r.mu.Unlock()
	if start.IsZero() {
		return nil
	}
	limit := r.MaxPass
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	if d := r.now().Sub(start); d > limit {
		return fmt.Errorf("a repartitioning pass has been running for %s (since %s), longer than %s: an NVML call or an API request may hang",
			d.Round(time.Second), start.UTC().Format(time.RFC3339), limit)
	}
	return nil
}

func (r *NodeReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *NodeReconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return time.Minute
}

// heldNow is what GPU idx holds after the pass res, as status shows it: its
// layout text, "-" with MIG mode off, "" where the pass did not see it.
func heldNow(res *SyncResult, idx int) string {
	for i := range res.GPUs {
		g := &res.GPUs[i]
		if g.GPU.Index != idx {
			continue
		}
		if !g.GPU.MIGMode.Current {
			return "-"
		}
		return layoutOf(g).String()
	}
	return ""
}

// heldNote is the note of a Repartitioned event: what the GPU of spec
// holds now, MIG mode off told apart from MIG on without a device.
func heldNote(spec v1alpha1.GPUSpec) string {
	switch {
	case !spec.MIGEnabled:
		return fmt.Sprintf("GPU %d has MIG mode off", spec.Index)
	case spec.Layout == "":
		return fmt.Sprintf("GPU %d is in MIG mode, with no device", spec.Index)
	}
	return fmt.Sprintf("GPU %d holds %q", spec.Index, spec.Layout)
}
