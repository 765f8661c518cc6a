package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims;deviceclasses;resourceslices;devicetaintrules,verbs=get;list;watch

// Pod event reasons of the Auto planner.
const (
	// EventWaitingForRepartition (Normal, on a pod): a GPU is being
	// repartitioned for it; the note names the node, GPU and layout.
	EventWaitingForRepartition = "WaitingForRepartition"
	// EventNotServable (Warning, on a pod): no Auto node can serve its claims;
	// the note says why.
	EventNotServable = "NotServableByAutoMode"
	// EventWaitingForCapacity (Normal, on a pod): no GPU can take it now
	// (devices in use are in the way, the limits on GPUs changed at once
	// are reached, or only nodes whose agent is lost could); for a large
	// profile the note names the placement kept for it.
	EventWaitingForCapacity = "WaitingForCapacity"
	// EventWaitingForSharedClaim (Normal, on a pod): the pod shares claims
	// with a pod the plan serves, and has other claims too; it is planned
	// once the shared claims are allocated.
	EventWaitingForSharedClaim = "WaitingForSharedClaim"
	// EventSchedulerDeclinedNode (Warning, on a pod): free devices a plan
	// gave the pod waited on a node for AutoPlanner.UnboundAfter and
	// kube-scheduler did not bind it there; the node is left out of the
	// pod's plans for AutoPlanner.DeclinedFor (doubled each time it is left
	// out again, up to 8 times). The note names the node, the devices and
	// for how long.
	EventSchedulerDeclinedNode = "SchedulerDeclinedNode"
	// EventNoLongerPlanned (Normal, on a pod): no MigLayout is in Auto mode
	// any more, or the pod, still waiting for devices, no longer asks for
	// a MIG device Auto mode makes (its claims or their DeviceClasses
	// changed), so what the planner last told the pod (a GPU being
	// repartitioned for it, a placement kept for it) no longer holds.
	EventNoLongerPlanned = "NoLongerPlanned"
)

// autoKey is the single work item of the Auto planner: it plans all Auto
// nodes and all pending pods together.
var autoKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "auto-planner"}}

// AutoPlanner runs pkg/planner over the nodes of Auto MigLayouts and the
// pending pods, and writes the GPU layouts it chooses into the nodes'
// NodeMigLayout specs. Demand is batched: a plan is made once the inputs
// have been quiet for Idle, or Max after the first change, whichever comes
// first.
type AutoPlanner struct {
	Client client.Client
	// Recorder records events; SetupWithManager wraps it in
	// eventnote.Distinct, so that an event with a new note is never folded into
	// the series of an earlier one.
	Recorder events.EventRecorder
	Catalog  *mig.Catalog
	// Driver is the DRA driver name the agents publish under.
	Driver string
	// Idle and Max bound the batching window; defaults 2 s and 10 s.
	Idle, Max time.Duration
	// ReadEvery is the least time between two passes that read the
	// inputs: changes closer together are read by one pass (readsDue). It
	// is capped at a quarter of Idle and of Max. 0 or negative reads on
	// every change; miglayout-controller's default is DefaultReadEvery.
	ReadEvery time.Duration
	// AgingAfter is how long a pending pod may be passed over by larger
	// pods of its priority before it is planned by age (see
	// planner.Snapshot.AgingAfter); 0 means planner.DefaultAgingAfter, a
	// negative value never.
	AgingAfter time.Duration
	// UnboundAfter is how long free devices a plan gave a pending pod may
	// wait on a node before the planner takes the node as one
	// kube-scheduler keeps the pod off for a reason it does not judge and
	// plans the pod elsewhere (declineTracker); 0 means
	// DefaultUnboundAfter, a negative value never.
	UnboundAfter time.Duration
	// DeclinedFor is how long such a node stays out of the pod's plans
	// the first time (each time again for the same pod doubles it, up to 8
	// times); 0 means DefaultDeclinedFor.
	DeclinedFor time.Duration
	// SchedulerLease is kube-scheduler's leader-election Lease: while it
	// shows no scheduler that has been running for UnboundAfter, no node is
	// declined (schedulerSteady). The zero name checks none; a Lease that
	// does not exist or cannot be read is not checked.
	SchedulerLease types.NamespacedName
	// SchedulerNames are the schedulers whose pending pods are Auto demand
	// (AutoInputs.SchedulerNames); empty: default-scheduler alone.
	SchedulerNames []string
	// APIReader reads around the manager's cache: kube-scheduler's
	// Lease (nil: Client), as the controller starts its own
	// SchedulerDeclinedNode events (nil: none read, readDeclines), and
	// the MigLayouts a plan is about to be written for (nil: Client,
	// stillAuto). SetupWithManager sets it.
	APIReader client.Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AgentLeases judges the agents' heartbeats (nodes of lost agents are
	// planner.Node.Frozen); nil checks none.
	AgentLeases *AgentLeases
	// BoundPods reads the pods bound to a node (what they request of it,
	// whether they end), since the manager's cache (Client) holds the
	// unbound ones only (miglayout-controller's cacheByObject);
	// SetupWithManager sets it, when nil, to a cache of its own
	// (newBoundPodsCache). Left nil without SetupWithManager, Client is
	// read for every pod (a client that holds them all, as in tests).
	BoundPods client.Reader
	// TaintRulesPoll is how often a controller started while the API
	// server did not serve DeviceTaintRules looks again; once it does, the
	// manager ends with ErrDeviceTaintRulesServed. 0 means
	// DefaultTaintRulesPoll.
	TaintRulesPoll time.Duration
	// taintRules: the API server serves DeviceTaintRules (resource.k8s.io/v1,
	// Kubernetes 1.37+), which the planner then reads; set by
	// SetupWithManager.
	taintRules bool

	// statusMu guards autoWritten, apart from mu: writeAutoStatus holds it
	// across its API calls, and the watches' predicates take mu.
	statusMu sync.Mutex
	// autoWritten is the status.auto last written per MigLayout (without
	// its time), so an unchanged one is not written again though the cache
	// may lag behind the write.
	autoWritten map[string]v1alpha1.AutoStatus

	// written are the NodeMigLayout specs the planner wrote that the cache
	// may not show yet (keyed by autoWrites): a pass waits until it does
	// (cacheShowsWrites).
	written rolloutExpectations

	mu    sync.Mutex
	batch batcher
	// urgent is when a pass last planned for each change in flight
	// (urgentCancel's keys) before the batching window closed: at most
	// every urgentEvery, so that pods arriving while it drains do not
	// plan every pass at once.
	urgent map[string]time.Time
	// lastRead is when the last pass read the inputs, readFailures how
	// many passes in a row failed (readsDue).
	lastRead     time.Time
	readFailures int
	events       map[string]podEvent // by pod UID: the last event, so each pod hears once per change (and again when it may have expired)
	// untold is the last plan while it left pods untold
	// (maxPodEventsPerPass): the next passes tell them from it, without
	// planning again, while the inputs stay as they were planned.
	untold *untoldPlan
	// labelKeys are the node labels the last snapshot's pods and other
	// drivers' slices select on, and those MigLayouts select nodes by
	// (a node that leaves a conflict or an Auto MigLayout by a label
	// changes no object the planner watches but itself): a change of
	// another label does not wake the planner.
	labelKeys map[string]bool
	// autoNodes are the last snapshot's nodes: a pod bound to one that
	// ends, claims or not, frees the resources a pending pod may wait
	// for there (planner.WaitsForNodeResources). While there are any,
	// kube-scheduler's Lease is followed (followSchedulerLease).
	autoNodes sets.Set[string]
	// reading is set while a pass runs from its read of the inputs to its
	// update of labelKeys and autoNodes: an event in between, which the
	// read may not show, is let through whatever those sets say
	// (onAutoNode, nodeChangeMatters), or it would be dropped by the sets
	// of the pass before and wake nothing until the refresh.
	reading bool
	// idleGPUs: since when each GPU has been seen idle (idleTracker).
	idleGPUs idleTracker
	// declines: the nodes kube-scheduler keeps pending pods off.
	declines declineTracker
	// scheduler follows kube-scheduler's Lease (schedulerSteady).
	scheduler schedulerWatch
	// leaseReads lets one reading of kube-scheduler's Lease run at a
	// time (readSchedulerLease); taken before mu.
	leaseReads sync.Mutex
	// declinesRead: the declines have been read back from the
	// controller's events (readDeclines), or that was given up;
	// declineReadFailures counts the tries that failed.
	declinesRead        bool
	declineReadFailures int
}

// SetupWithManager registers the planner: any change to pods waiting for
// claims or extended resources, ResourceClaims, NodeMigLayouts, MigLayouts, nodes' labels and
// taints, DeviceClasses or other drivers' ResourceSlices enqueues the one
// key.
func (a *AutoPlanner) SetupWithManager(mgr ctrl.Manager) error {
	if a.Client == nil {
		a.Client = mgr.GetClient()
	}
	if a.Recorder == nil {
		a.Recorder = mgr.GetEventRecorder(Name)
	}
	if a.APIReader == nil {
		a.APIReader = mgr.GetAPIReader()
	}
	a.Recorder = eventnote.Distinct(a.Recorder)
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{autoKey}
	})
	matters := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && (podMatters(p) || a.endsOnAutoNode(p) || a.nominatedToAutoNode(p))
	}
	// A nomination that ends matters as one that begins: the old pod
	// tells.
	waiting := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return matters(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return matters(e.ObjectOld) || matters(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return matters(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return matters(e.Object) },
	}
	// Node feasibility reads taints, unschedulable and the labels pods
	// select on (feasibilityLabelKeys of the last plan), not status nor
	// labels nothing selects on.
	nodeSpec := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || a.nodeChangeMatters(o, n)
	}}
	var boundSource source.Source
	if a.BoundPods == nil {
		bound, err := newBoundPodsCache(mgr)
		if err != nil {
			return err
		}
		a.BoundPods = bound
		// A bound pod that ends frees its node's resources and lets go
		// of its devices.
		b := source.Kind(bound, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *corev1.Pod) []reconcile.Request {
			return []reconcile.Request{autoKey}
		}), a.boundPodEvents())
		boundSource = b
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("autoplanner").
		WithOptions(controller.Options{RateLimiter: failureRateLimiter()}).
		Watches(&corev1.Pod{}, one, builder.WithPredicates(waiting)).
		Watches(&resourceapi.ResourceClaim{}, one).
		Watches(&v1alpha1.NodeMigLayout{}, one).
		Watches(&v1alpha1.MigLayout{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, one, builder.WithPredicates(nodeSpec)).
		Watches(&resourceapi.DeviceClass{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Other drivers' slices decide pods that also ask for their
		// devices; miglayout's own mostly follow the NodeMigLayouts'
		// status, but hold the devices the plan does not change (a GPU
		// published whole), which a pod may ask for beside a MIG device
		// (unplannedDevices). A pass whose inputs are unchanged
		// (inputKey) plans nothing.
		Watches(&resourceapi.ResourceSlice{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	// DeviceTaintRules taint devices as the agents' own taints do: where
	// the API server serves them, they are watched and read.
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: resourceapi.GroupName, Kind: "DeviceTaintRule"}, resourceapi.SchemeGroupVersion.Version); err == nil {
		a.taintRules = true
		b = b.Watches(&resourceapi.DeviceTaintRule{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	} else if !meta.IsNoMatchError(err) {
		return fmt.Errorf("looking up DeviceTaintRules: %w", err)
	} else {
		d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("creating the discovery client: %w", err)
		}
		if err := mgr.Add(a.taintRulesWatcher(d)); err != nil {
			return fmt.Errorf("adding the DeviceTaintRules watcher: %w", err)
		}
	}
	if boundSource != nil {
		b = b.WatchesRawSource(boundSource)
	}
	if a.SchedulerLease.Name != "" {
		if err := mgr.Add(a.schedulerLeaseFollower(schedulerMinRecheck)); err != nil {
			return fmt.Errorf("adding the kube-scheduler Lease follower: %w", err)
		}
	}
	if a.AgentLeases != nil {
		// A Lease's expiry has no event: Reconcile looks again when due.
		b = b.Watches(&coordinationv1.Lease{}, one, builder.WithPredicates(agentLeaseChange(a.AgentLeases.Namespace)))
	}
	return b.Complete(a)
}

// Reconcile plans once the batching window has passed. It reads the inputs
// at most every readEvery.
func (a *AutoPlanner) Reconcile(ctx context.Context, _ ctrl.Request) (_ ctrl.Result, err error) {
	if wait := a.readsDue(); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	defer func() { a.passEnded(err) }()
	logger := klog.FromContext(ctx).WithName("autoplanner")
	ctx = klog.NewContext(ctx, logger)
	a.mu.Lock()
	a.reading = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.reading = false
		a.mu.Unlock()
	}()
	in, err := a.read(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait, err := a.cacheShowsWrites(ctx, in.NodeMigLayouts); err != nil || wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if !slices.ContainsFunc(in.MigLayouts, plansAuto) {
		a.retract(ctx)
	}
	leases, err := a.AgentLeases.List(ctx, a.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	health, recheck := a.AgentLeases.NodeHealth(in.NodeMigLayouts, leases, LostInStatus(autoMigLayouts(in.MigLayouts)...))
	for node, h := range health {
		if h.Lost {
			if in.LostAgents == nil {
				in.LostAgents = sets.New[string]()
			}
			in.LostAgents.Insert(node)
		}
	}
	// A Lease's expiry has no event: look again when one is due.
	again := a.AgentLeases.requeueAt(recheck)
	snap := AutoSnapshot(ctx, in, a.catalog(), a.now(), a.agingAfter())
	if unconfirmed := unconfirmedAutoNodes(snap, health); len(unconfirmed) > 0 {
		// Planned now, a node whose agent may be dead could take a
		// change (and hold a slot of maxGPUs until the agent is back);
		// frozen, the pods its changes in flight serve would be planned
		// again elsewhere. Nothing is planned until each agent is seen
		// renewing, or is lost: a renewal interval after a start.
		logger.Info("Holding Auto plans until the agents of these nodes are seen renewing their heartbeat Leases (this controller started less than a lease duration ago)", "nodes", unconfirmed)
		return ctrl.Result{RequeueAfter: again}, nil
	}
	recordPending(&snap)
	a.readDeclines(ctx, in.Pods, snap.Now)
	// Batched with no Auto node too: a plan then tells the pending pods so.
	a.mu.Lock()
	if a.idleGPUs == nil {
		a.idleGPUs = idleTracker{}
	}
	idleDue := a.idleGPUs.mark(&snap)
	a.autoNodes = sets.New[string]()
	for _, n := range snap.Nodes {
		a.autoNodes.Insert(n.Node.Name)
	}
	a.labelKeys = feasibilityLabelKeys(in, snap)
	maps.Copy(a.labelKeys, selectorLabelKeys(in.MigLayouts))
	a.reading = false
	overdue, declineDue := a.declines.prepare(in, &snap, a.unboundAfter())
	a.mu.Unlock()
	// A wait that has run its course declines its node only while
	// kube-scheduler is steady (schedulerSteady); the key tells a held
	// wait from one that may decline, so that one is planned once the
	// hold ends.
	steady := true
	if overdue != "" {
		var why string
		if steady, why = a.schedulerSteady(ctx); !steady {
			logger.V(1).Info("Holding back declines while kube-scheduler is not steady", "why", why)
			declineDue = sooner(declineDue, schedulerHoldRecheck)
		}
	}
	key := inputKey(in, snap) + declineKey(overdue, steady)
	a.mu.Lock()
	wait := a.batch.observe(key, a.now(), a.idle(), a.max())
	if wait > 0 && key != a.batch.planned {
		// A change its agent has not started may have to be cancelled
		// before the agent's settle period ends, sooner than the window
		// closes: the pass plans now, once for each such change.
		maps.DeleteFunc(a.urgent, func(_ string, at time.Time) bool { return a.now().Sub(at) >= urgentEvery })
		change, why := urgentCancel(in, snap, sets.KeySet(a.urgent))
		if change != "" {
			logger.V(1).Info("Planning before the batching window closes", "why", why)
			if a.urgent == nil {
				a.urgent = map[string]time.Time{}
			}
			a.urgent[change] = a.now()
			a.batch.plannedNow(key)
			wait = 0
		}
	}
	a.mu.Unlock()
	// Every return asks to be looked at again when the next thing that has
	// no event of its own is due (the queue keeps one request per key: a
	// later, longer one would replace it).
	due := sooner(sooner(sooner(sooner(again, nextAging(snap)), nextRefresh(snap)), idleDue), declineDue)
	if wait > 0 {
		if a.tellUntold(key) {
			due = sooner(due, eventBacklogRecheck)
		}
		return ctrl.Result{RequeueAfter: sooner(wait, due)}, nil
	}
	a.setUntold(nil)
	// Changes to cancel (BlockedChanges) run the planner too, and so do
	// changes in flight that may no longer be needed (UnneededChanges) and
	// GPUs being given back (ReclaimCancels: the policy may have stopped
	// reclaiming since).
	cancels := BlockedChanges(in, snap)
	unneeded := unneededCandidates(in, snap)
	if len(snap.Pending) == 0 && !wantsSpares(snap) && !anyReclaimDue(snap) && !anyReclaiming(snap) && len(cancels) == 0 && len(unneeded) == 0 {
		a.untell(in, snap)
		if err := a.writeAutoStatus(ctx, in.MigLayouts, AutoStatuses(in, snap, nil)); err != nil {
			a.forget()
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: due}, nil
	}
	res, err := a.plan(ctx, &in, &snap, steady)
	if err != nil {
		a.forget()
		return ctrl.Result{}, err
	}
	if d := a.declineDue(); d > 0 {
		due = sooner(due, d)
	}
	cancels = append(cancels, UnneededChanges(in, snap, unneeded, res)...)
	cancels = append(cancels, ReclaimCancels(in, snap, res)...)
	logger.V(1).Info("Planned", "pending", len(snap.Pending), "changes", len(res.Changes), "cancelled", len(cancels), "served", len(res.Served), "kept", len(res.Kept), "unservable", len(res.Unservable))
	held, err := a.apply(ctx, in.NodeMigLayouts, planGenerations(in.MigLayouts), res.Changes, cancels)
	if err != nil {
		a.forget()
		return ctrl.Result{}, err
	}
	if held {
		// Nothing of the plan is told, and the Auto status of the last
		// plan stands (without a plan it would count no pod waiting): the
		// next plan, on the agent's report that held it, says what is
		// planned.
		return ctrl.Result{RequeueAfter: due}, nil
	}
	backlog := a.notify(in, snap, res)
	if err := a.writeAutoStatus(ctx, in.MigLayouts, AutoStatuses(in, snap, &res)); err != nil {
		a.forget()
		return ctrl.Result{}, err
	}
	if backlog {
		// The next passes tell the pods left untold from this plan,
		// while the inputs stay as planned (tellUntold).
		a.setUntold(&untoldPlan{in: in, snap: snap, res: res})
		due = sooner(due, eventBacklogRecheck)
	}
	return ctrl.Result{RequeueAfter: due}, nil
}

// urgentEvery is how often at most a pass plans for one change in flight
// before the batching window closes (urgentCancel): within the agent's
// settle period (5 s by default), a few times, whatever arrives meanwhile.
const urgentEvery = time.Second

// plan runs the planner on snap. Where the plan gives a pod free devices
// on a node kube-scheduler has not bound it to for UnboundAfter, and
// kube-scheduler is steady, the node is declined for the pod
// (declineTracker) and the pod is planned again without it, in the same
// pass.
func (a *AutoPlanner) plan(ctx context.Context, in *AutoInputs, snap *planner.Snapshot, steady bool) (planner.Result, error) {
	run := func() (planner.Result, error) {
		start := time.Now()
		res, err := planner.Plan(ctx, *snap)
		plannerLatency.Observe(time.Since(start).Seconds())
		if err != nil {
			return res, fmt.Errorf("planning Auto layouts: %w", err)
		}
		return res, nil
	}
	res, err := run()
	if err != nil {
		return res, err
	}
	if a.unboundAfter() <= 0 {
		return res, nil
	}
	a.mu.Lock()
	declined := a.declines.observe(*in, snap, res, a.unboundAfter(), a.declinedFor(), steady)
	a.mu.Unlock()
	if len(declined) == 0 {
		return res, nil
	}
	logger := klog.FromContext(ctx)
	for _, d := range declined {
		schedulerDeclinedMetric.Inc()
		logger.Info("kube-scheduler did not bind a pod where free devices waited for it; planning it elsewhere", "pod", klog.KObj(d.pod), "node", d.node, "devices", d.devices, "waited", d.waited)
		if a.Recorder != nil {
			a.Recorder.Eventf(d.pod, nodeMigLayoutRef(d.node), corev1.EventTypeWarning, EventSchedulerDeclinedNode, "Plan", "%s", truncate(declinedNote(d), maxEventNote))
		}
	}
	if res, err = run(); err != nil {
		return res, err
	}
	a.mu.Lock()
	a.declines.observe(*in, snap, res, a.unboundAfter(), a.declinedFor(), false)
	// The inputs are planned with the nodes declined now: the next pass
	// plans them again only if something changes.
	a.batch.planned = inputKey(*in, *snap) + declineKey(a.declines.overdue(snap.Now, a.unboundAfter()), steady)
	a.batch.key = a.batch.planned
	a.mu.Unlock()
	return res, nil
}

// declineKey is what the batcher's key adds for the waits due (overdue,
// declineTracker.prepare): held while kube-scheduler is not steady, or not.
func declineKey(overdue string, steady bool) string {
	if overdue != "" && !steady {
		return overdue + " held"
	}
	return overdue
}

// declineDue is how long until a pod's free devices have waited
// UnboundAfter or a node declined for a pod is tried again (0: none).
func (a *AutoPlanner) declineDue() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.declines.due(a.now(), a.unboundAfter())
}

func (a *AutoPlanner) unboundAfter() time.Duration {
	switch {
	case a.UnboundAfter < 0:
		return 0
	case a.UnboundAfter == 0:
		return DefaultUnboundAfter
	}
	return a.UnboundAfter
}

func (a *AutoPlanner) declinedFor() time.Duration {
	if a.DeclinedFor > 0 {
		return a.DeclinedFor
	}
	return DefaultDeclinedFor
}

// plansAuto reports whether the planner plans for ml: Auto mode, and not
// being deleted. A MigLayout whose deletion waits on a finalizer
// (foreground deletion, a GitOps tool's) no longer counts as Auto: its
// nodes are in no snapshot, so its pods are told they are no longer
// planned (retract) rather than that no Auto node exists.
func plansAuto(ml v1alpha1.MigLayout) bool {
	return ml.Spec.Mode == v1alpha1.ModeAuto && ml.DeletionTimestamp == nil
}

// autoMigLayouts are the MigLayouts among mls the planner plans for
// (plansAuto).
func autoMigLayouts(mls []v1alpha1.MigLayout) []*v1alpha1.MigLayout {
	var out []*v1alpha1.MigLayout
	for i := range mls {
		if plansAuto(mls[i]) {
			out = append(out, &mls[i])
		}
	}
	return out
}

func (a *AutoPlanner) read(ctx context.Context) (AutoInputs, error) {
	in := AutoInputs{Driver: a.driver(), NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}, Claims: map[types.NamespacedName]*resourceapi.ResourceClaim{},
		SchedulerNames: sets.New(a.SchedulerNames...)}
	var mls v1alpha1.MigLayoutList
	if err := a.Client.List(ctx, &mls); err != nil {
		return in, fmt.Errorf("listing MigLayouts: %w", err)
	}
	in.MigLayouts = mls.Items
	if !slices.ContainsFunc(mls.Items, plansAuto) {
		return in, nil
	}
	var nodes corev1.NodeList
	if err := a.Client.List(ctx, &nodes); err != nil {
		return in, fmt.Errorf("listing Nodes: %w", err)
	}
	in.Nodes = nodes.Items
	var nmls v1alpha1.NodeMigLayoutList
	if err := a.Client.List(ctx, &nmls); err != nil {
		return in, fmt.Errorf("listing NodeMigLayouts: %w", err)
	}
	for i := range nmls.Items {
		in.NodeMigLayouts[nmls.Items[i].Name] = &nmls.Items[i]
	}
	var pods corev1.PodList
	if err := a.Client.List(ctx, &pods); err != nil {
		return in, fmt.Errorf("listing Pods: %w", err)
	}
	in.Pods = pods.Items
	if a.BoundPods != nil {
		var bound corev1.PodList
		// Read only (nodeRequests, releasingDevices): no copy of every
		// running pod per plan.
		if err := a.BoundPods.List(ctx, &bound, client.UnsafeDisableDeepCopy); err != nil {
			return in, fmt.Errorf("listing bound Pods: %w", err)
		}
		in.Pods = append(in.Pods, bound.Items...)
	}
	var claims resourceapi.ResourceClaimList
	if err := a.Client.List(ctx, &claims); err != nil {
		return in, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		in.Claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	var classes resourceapi.DeviceClassList
	if err := a.Client.List(ctx, &classes); err != nil {
		return in, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	for i := range classes.Items {
		in.Classes = append(in.Classes, &classes.Items[i])
	}
	var rs resourceapi.ResourceSliceList
	if err := a.Client.List(ctx, &rs); err != nil {
		return in, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	in.Slices = rs.Items
	if a.taintRules {
		var rules resourceapi.DeviceTaintRuleList
		if err := a.Client.List(ctx, &rules); err != nil {
			return in, fmt.Errorf("listing DeviceTaintRules: %w", err)
		}
		in.TaintRules = rules.Items
	}
	return in, nil
}

// apply writes each cancel (BlockedChanges, UnneededChanges,
// ReclaimCancels) that still holds on the NodeMigLayout as read for the
// write, then each change, into its node's NodeMigLayout spec.
//
// The cancels go first, and the changes are written only once every
// cancel is: the plan counted the cancelled GPUs as not changing (it may
// have given their slots of the limits on GPUs changing at once to its
// changes) and planned the pods a blocked change served elsewhere. A cancel
// the agent got ahead of (it started on the GPU meanwhile) is not written;
// the plan's changes then wait for the next plan, which sees that GPU
// changing and its pods served, rather than serve a pod twice. The second
// write starts from the NodeMigLayouts the first one wrote, as the API
// server returned them: the cache may not show that write yet. held
// reports changes held back so, or not all written (their node's spec
// changed since the plan read it, or their MigLayout was edited, paused or
// switched to Static mode: stillAuto, against generations, the MigLayouts'
// metadata.generation the plan was made from, by UID).
func (a *AutoPlanner) apply(ctx context.Context, read map[string]*v1alpha1.NodeMigLayout, generations map[types.UID]int64, changes, cancels []planner.Change) (held bool, err error) {
	var fresh map[string]*v1alpha1.NodeMigLayout
	if len(cancels) > 0 {
		written, n, err := a.write(ctx, read, generations, nil, cancels, nil)
		if err != nil {
			return false, err
		}
		if n < len(cancels) {
			klog.FromContext(ctx).Info("A change in flight could not be cancelled (its agent started on it, or its MigLayout was edited, paused or switched since): the plan's changes wait for the next plan", "cancels", len(cancels), "written", n, "changes", len(changes))
			return len(changes) > 0, nil
		}
		read = maps.Clone(read)
		for node, nml := range written {
			read[node] = nml
		}
		fresh = written
	}
	if len(changes) == 0 {
		return false, nil
	}
	_, n, err := a.write(ctx, read, generations, changes, nil, fresh)
	if err != nil {
		return false, err
	}
	if n < len(changes) {
		// A node's spec no longer as the plan read it when written (a
		// conflict retried on a cache behind the cancels just written,
		// or an agent that started on a reclaim the change replaces):
		// the changes written stand, the others wait for the next plan,
		// and nothing of this one is told. Its inputs may look the same
		// once the cache catches up: it is planned again all the same.
		klog.FromContext(ctx).Info("Some planned changes were not written (their NodeMigLayouts, or their MigLayout, changed since the plan read them): the next plan makes them", "changes", len(changes), "written", n)
		a.forget()
		return true, nil
	}
	return false, nil
}

// write writes changes and cancels as apply describes, each only where it
// holds on the NodeMigLayout as read for the write (fresh's, as the API
// server returned it, where fresh has the node, on the first try; the
// cache's otherwise), and returns the NodeMigLayouts it wrote, as written,
// by node, and how many changes and cancels it wrote or found written
// already. A node whose write fails is skipped: the error (of every such
// node) is returned after the other nodes are written. generations are
// the controlling MigLayouts' generations the plan was made from
// (stillAuto).
func (a *AutoPlanner) write(ctx context.Context, read map[string]*v1alpha1.NodeMigLayout, generations map[types.UID]int64, changes, cancels []planner.Change, fresh map[string]*v1alpha1.NodeMigLayout) (map[string]*v1alpha1.NodeMigLayout, int, error) {
	logger := klog.FromContext(ctx)
	out := map[string]*v1alpha1.NodeMigLayout{}
	byNode := map[string][]planner.Change{}
	for _, c := range append(slices.Clone(changes), cancels...) {
		byNode[c.Node] = append(byNode[c.Node], c)
	}
	// holds reports whether c is to be written on nml: only while nml is
	// still as the plan read it (the same Auto MigLayout controls it, the
	// GPU at c's index is the one read, and its spec is the one read:
	// another plan's change, on this GPU or
	// another one the plan counted as not changing, or a Static MigLayout
	// that took the node over since is not overwritten, and the limits on
	// GPUs changing at once hold); a change then always, a cancel while nml
	// still shows the change it cancels blocked or undestroyed
	// (stillCancels).
	auto, err := a.stillAuto(ctx, read, generations, sortedKeys(byNode))
	if err != nil {
		return nil, 0, err
	}
	holds := func(nml *v1alpha1.NodeMigLayout, c planner.Change) bool {
		before := read[c.Node]
		ref := metav1.GetControllerOf(nml)
		if before == nil || ref == nil || !sameController(before, nml) || !auto[ref.UID] ||
			!equality.Semantic.DeepEqual(before.Spec, nml.Spec) || !writtenInAuto(nml) {
			return false
		}
		// The GPU at c's index must be the one the plan read: one NVML
		// numbered anew since (another UUID there) gets its own plan.
		if reportedUUID(before, c.GPU) != reportedUUID(nml, c.GPU) {
			return false
		}
		for _, x := range cancels {
			if x.Node == c.Node && x.GPU == c.GPU {
				return stillCancels(before, nml, x)
			}
		}
		// A change in place of a reclaim in flight (planned on the
		// GPU's actual layout) only while that reclaim has destroyed
		// nothing, as a cancel.
		if x, ok := inFlightReclaim(before, c.GPU); ok {
			return stillCancels(before, nml, x)
		}
		return true
	}
	count := 0
	var errs []error
	for _, node := range sortedKeys(byNode) {
		var written []planner.Change
		already := 0
		first := true
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			written, already = nil, 0
			var nml v1alpha1.NodeMigLayout
			if w, ok := fresh[node]; ok && first {
				w.DeepCopyInto(&nml)
			} else if err := a.Client.Get(ctx, types.NamespacedName{Name: node}, &nml); err != nil {
				return err
			}
			first = false
			next := nml.DeepCopy()
			for _, c := range byNode[node] {
				if !holds(&nml, c) {
					continue
				}
				// Stamped with the UUID of the GPU the plan read, so
				// that the agent refuses it on any other GPU.
				spec := v1alpha1.GPUSpec{Index: int32(c.GPU), UUID: reportedUUID(read[c.Node], c.GPU), MIGEnabled: true, Layout: c.To.String(), Reason: truncate(c.Reason, 1024),
					ServedPods: slices.Clone(c.Serves[:min(len(c.Serves), maxServedPods)])}
				i := slices.IndexFunc(next.Spec.GPUs, func(g v1alpha1.GPUSpec) bool { return g.Index == spec.Index })
				if i >= 0 && equality.Semantic.DeepEqual(next.Spec.GPUs[i], spec) {
					// Written already: a reclaim in flight the plan
					// makes again.
					already++
					continue
				}
				written = append(written, c)
				if i < 0 {
					next.Spec.GPUs = append(next.Spec.GPUs, spec)
				} else {
					next.Spec.GPUs[i] = spec
				}
			}
			if len(written) == 0 {
				return nil
			}
			metav1.SetMetaDataAnnotation(&next.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(v1alpha1.ModeAuto))
			sort.Slice(next.Spec.GPUs, func(i, j int) bool { return next.Spec.GPUs[i].Index < next.Spec.GPUs[j].Index })
			if err := a.Client.Patch(ctx, next, client.MergeFromWithOptions(&nml, client.MergeFromWithOptimisticLock{})); err != nil {
				if writeMayHaveApplied(err) {
					// The next pass reads the node live to tell.
					a.written.expectUnsure(autoWrites, node, next.Spec.GPUs, a.now())
				}
				return err
			}
			a.written.expect(autoWrites, node, next.Spec.GPUs, next.UID, next.Generation, a.now())
			out[node] = next
			return nil
		})
		if err != nil {
			// The other nodes are written all the same: one node whose
			// write keeps failing holds back no other node's changes.
			errs = append(errs, fmt.Errorf("writing planned layouts of node %s: %w", node, err))
			continue
		}
		count += len(written) + already
		if len(written) > 0 {
			writesMetric.WithLabelValues("plan").Inc()
		}
		for _, c := range written {
			if c.Reclaims {
				reclaimedMetric.Inc()
			}
			logger.Info("Planned GPU layout", "node", node, "gpu", c.GPU, "from", c.From.String(), "to", c.To.String(), "destroyed", c.Destroyed.String(), "reason", c.Reason)
		}
	}
	return out, count, errors.Join(errs...)
}

// maxServedPods is the MaxItems of GPUSpec.ServedPods.
const maxServedPods = 32

// sameController reports whether a and b have the same controller (by UID).
func sameController(a, b *v1alpha1.NodeMigLayout) bool {
	ra, rb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return ra != nil && rb != nil && ra.UID == rb.UID
}

// stillAuto reports, by UID, which of the controllers of the NodeMigLayouts
// of nodes (as read, the plan's) are Auto-mode MigLayouts now, not paused,
// and with the spec the plan was made from (generations has their
// metadata.generation then): a pause, a switch to Static mode or a policy
// edit (maxGPUs lowered, allowedProfiles narrowed) that lands while a pass
// plans stops its writes, and the next pass plans under the new spec. Each
// MigLayout is read once, from the API server (APIReader; the cache,
// Client, without one), so that an edit the cache does not show yet also
// stops them; one deleted or replaced (another UID), or that the plan did
// not read (not in generations), is not. A read that fails is returned:
// the pass is tried again with the controller's backoff, its changes and
// cancels unwritten.
func (a *AutoPlanner) stillAuto(ctx context.Context, read map[string]*v1alpha1.NodeMigLayout, generations map[types.UID]int64, nodes []string) (map[types.UID]bool, error) {
	var reader client.Reader = a.Client
	if a.APIReader != nil {
		reader = a.APIReader
	}
	out := map[types.UID]bool{}
	for _, node := range nodes {
		var ref *metav1.OwnerReference
		if nml := read[node]; nml != nil {
			ref = metav1.GetControllerOf(nml)
		}
		if ref == nil || ref.Kind != "MigLayout" {
			continue
		}
		if _, done := out[ref.UID]; done {
			continue
		}
		var ml v1alpha1.MigLayout
		err := reader.Get(ctx, types.NamespacedName{Name: ref.Name}, &ml)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading MigLayout %s before writing its plan: %w", ref.Name, err)
		}
		planned, ok := generations[ref.UID]
		out[ref.UID] = err == nil && ml.UID == ref.UID && plansAuto(ml) && !ml.Spec.Paused && ok && ml.Generation == planned
	}
	return out, nil
}

// planGenerations is the metadata.generation of each of mls, by UID: the
// specs a plan is made from, which its write checks (stillAuto).
func planGenerations(mls []v1alpha1.MigLayout) map[types.UID]int64 {
	out := make(map[types.UID]int64, len(mls))
	for _, ml := range mls {
		out[ml.UID] = ml.Generation
	}
	return out
}

// writtenInAuto reports whether nml's spec was last written in Auto mode
// (v1alpha1.AnnotationSpecWrittenBy; an object without the annotation,
// of an earlier release, counts as so). A spec written in Static mode
// (the MigLayout was switched to Auto, or another MigLayout wrote it) is
// the reconciler's to take over first: it drops the changes the agent has
// not started, and the planner plans on what is left.
func writtenInAuto(nml *v1alpha1.NodeMigLayout) bool {
	v, ok := nml.Annotations[v1alpha1.AnnotationSpecWrittenBy]
	return !ok || v == string(v1alpha1.ModeAuto)
}

// retract tells each pod the planner told why it waits, and that still
// waits (unbound, not being deleted), that no MigLayout is in Auto mode
// any more (EventNoLongerPlanned), and forgets them all: the planner reads
// no pod then (AutoPlanner.read), so what it told them would otherwise
// stand, a repartition it may have cancelled among them. A pod that could
// not be read is forgotten unheard.
func (a *AutoPlanner) retract(ctx context.Context) {
	a.mu.Lock()
	told := a.events
	a.events = nil
	a.mu.Unlock()
	if a.Recorder == nil {
		return
	}
	for uid, e := range told {
		var pod corev1.Pod
		if err := a.Client.Get(ctx, e.pod, &pod); err != nil || string(pod.UID) != uid || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		a.Recorder.Eventf(&pod, nil, corev1.EventTypeNormal, EventNoLongerPlanned, "Plan", "%s",
			"no MigLayout is in Auto mode any more (or each one is being deleted): miglayout plans no GPU for this pod, and what it planned for it may be cancelled; the pod waits for kube-scheduler to find a device")
	}
}

func (a *AutoPlanner) catalog() *mig.Catalog {
	if a.Catalog != nil {
		return a.Catalog
	}
	return mig.DefaultCatalog()
}

func (a *AutoPlanner) driver() string {
	if a.Driver != "" {
		return a.Driver
	}
	return migslices.DefaultDriverName
}

func (a *AutoPlanner) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *AutoPlanner) idle() time.Duration {
	if a.Idle > 0 {
		return a.Idle
	}
	return 2 * time.Second
}

func (a *AutoPlanner) max() time.Duration {
	if a.Max > 0 {
		return a.Max
	}
	return 10 * time.Second
}

// podMatters reports whether a pod's event may change the plan: a pod with
// claims (or extended resources DeviceClasses back) that is pending, the
// demand, or bound and terminating or done, which lets go of its devices
// soon and so decides where a large pod waits (planner.GPU.Releasing).
func podMatters(p *corev1.Pod) bool {
	if len(p.Spec.ResourceClaims) == 0 && !asksExtendedResources(p) {
		return false
	}
	return p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// maxRoomShapes bounds the kinds of pending pods whose room on each node
// inputKey follows: a change of room that matters only to pods of other
// kinds is planned with the next change that the key sees (or the refresh
// every eventRepeat).
const maxRoomShapes = 64

// endsOnAutoNode reports whether p, claims or not, is bound to a node of
// the last snapshot and terminating or done: the CPU, memory and pod slot
// it lets go of may be what a pending pod waits for there.
func (a *AutoPlanner) endsOnAutoNode(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" || (p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
		return false
	}
	return a.onAutoNode(p.Spec.NodeName)
}

// boundPodEvents filters the bound pods' events to those that may change
// the plan: a pod that ends (podMatters, endsOnAutoNode), and any bound pod
// deleted from the API server that has claims or is on a node of the last
// snapshot, whatever its phase: a pod deleted at once (force-deleted with a
// grace period of 0, or by the pod garbage collector after its node went)
// may reach the informer as it was last stored, running and without a
// deletion timestamp, and its resources and devices are freed all the same.
func (a *AutoPlanner) boundPodEvents() predicate.TypedFuncs[*corev1.Pod] {
	ends := func(p *corev1.Pod) bool { return podMatters(p) || a.endsOnAutoNode(p) }
	return predicate.TypedFuncs[*corev1.Pod]{
		CreateFunc: func(e event.TypedCreateEvent[*corev1.Pod]) bool { return ends(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Pod]) bool {
			if ends(e.ObjectNew) {
				return true
			}
			// A pod resized in place changes its node's room.
			if !a.onAutoNode(e.ObjectNew.Spec.NodeName) {
				return false
			}
			before, after := corev1.ResourceList{}, corev1.ResourceList{}
			addRequestsOf(before, e.ObjectOld)
			addRequestsOf(after, e.ObjectNew)
			return !equality.Semantic.DeepEqual(before, after)
		},
		GenericFunc: func(e event.TypedGenericEvent[*corev1.Pod]) bool { return ends(e.Object) },
		DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Pod]) bool {
			p := e.Object
			if len(p.Spec.ResourceClaims) > 0 || asksExtendedResources(p) {
				return true
			}
			return a.onAutoNode(p.Spec.NodeName)
		},
	}
}

// nominatedToAutoNode reports whether p is a pod a preemption nominated to
// one of the last snapshot's nodes: kube-scheduler keeps room for it there
// (nodeRequests).
func (a *AutoPlanner) nominatedToAutoNode(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.Status.NominatedNodeName == "" {
		return false
	}
	return a.onAutoNode(p.Status.NominatedNodeName)
}

// onAutoNode reports whether node is one of the last snapshot's nodes, or
// may be: a pass is between its read of the inputs and its update of the
// set (reading).
func (a *AutoPlanner) onAutoNode(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reading || a.autoNodes.Has(node)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *AutoPlanner) agingAfter() time.Duration {
	switch {
	case a.AgingAfter < 0:
		return 0
	case a.AgingAfter == 0:
		return planner.DefaultAgingAfter
	}
	return a.AgingAfter
}

// wantsSpares reports whether an Auto node's policy keeps spare devices:
// the planner then runs even with no pod pending, to create them and to
// replace those taken.
func wantsSpares(snap planner.Snapshot) bool {
	return slices.ContainsFunc(snap.Nodes, func(n planner.Node) bool { return len(n.Policy.Spares) > 0 })
}

// nextAging is how long until the next pending pod of snap has waited
// snap.AgingAfter (0: none will).
func nextAging(snap planner.Snapshot) time.Duration {
	if snap.AgingAfter <= 0 || snap.Now.IsZero() {
		return 0
	}
	var next time.Duration
	for _, p := range snap.Pending {
		next = sooner(next, p.Pod.CreationTimestamp.Add(snap.AgingAfter).Sub(snap.Now))
	}
	return next
}

// anyTainted reports whether a DeviceTaintRule, or an Xid, keeps the planner from
// making some device on an Auto GPU of snap (planner.GPU.Tainted): a pod
// told it waits for room may then wait for that rule instead.
func anyTainted(snap planner.Snapshot) bool {
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if len(g.Tainted) > 0 {
				return true
			}
		}
	}
	return false
}

// unconfirmedAutoNodes are the nodes of snap whose agent is Unconfirmed
// (AgentHealth): seen by this process, not yet renewing. Sorted.
func unconfirmedAutoNodes(snap planner.Snapshot, health map[string]AgentHealth) []string {
	var out []string
	for _, n := range snap.Nodes {
		if health[n.Node.Name].Unconfirmed {
			out = append(out, n.Node.Name)
		}
	}
	slices.Sort(out)
	return out
}
