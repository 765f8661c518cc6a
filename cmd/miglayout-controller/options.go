package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/managerrun"
	"github.com/miglayout/miglayout/pkg/metricsopts"
	"github.com/miglayout/miglayout/pkg/planner"
	"github.com/miglayout/miglayout/pkg/slices"
)

// options are the command-line settings.
type options struct {
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	driverName              string
	batchIdle               time.Duration
	batchMax                time.Duration
	readEvery               time.Duration
	agingAfter              time.Duration
	unboundAfter            time.Duration
	declinedFor             time.Duration
	schedulerLease          string
	schedulerNames          string
	agentLeaseNamespace     string
}

func bindFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus metrics endpoint ("0" turns it off)`)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, metricsopts.SecureFlagHelp)
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address of the /healthz and /readyz endpoints ("0" turns them off)`)
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader through a Lease, so that only one replica reconciles")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "miglayout-controller.miglayout.io", "name of the leader-election Lease")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a non-leader waits before taking over an unrenewed Lease")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew the Lease before giving up leadership")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often leader-election clients retry")
	fs.StringVar(&o.driverName, "driver-name", "mig.miglayout.io", "DRA driver name the agents publish devices under")
	fs.DurationVar(&o.batchIdle, "auto-batch-idle", 2*time.Second, "Auto mode: plan once pending demand and node reports have been quiet this long")
	fs.DurationVar(&o.batchMax, "auto-batch-max", 10*time.Second, "Auto mode: plan at the latest this long after the first change of a batch")
	fs.DurationVar(&o.readEvery, "auto-read-every", controller.DefaultReadEvery, "Auto mode: read pending demand and nodes at most this often; changes closer together are read together, by one pass (at most a quarter of --auto-batch-idle and of --auto-batch-max; 0: on every change)")
	fs.DurationVar(&o.agingAfter, "auto-aging-after", planner.DefaultAgingAfter, "Auto mode: pods of one priority are planned largest first; a pod pending this long is planned by age instead (0: never)")
	fs.DurationVar(&o.unboundAfter, "auto-unbound-after", controller.DefaultUnboundAfter, "Auto mode: a pending pod that free devices a plan gave it have waited for this long on a node without kube-scheduler binding it there is planned on other nodes (something miglayout does not judge keeps it off that node: pod affinity, topology spread, host ports, volumes) (0: never)")
	fs.DurationVar(&o.declinedFor, "auto-declined-for", controller.DefaultDeclinedFor, "Auto mode: how long such a node stays out of the pod's plans before it is tried again (twice as long each time it is left out again for the pod, up to 8 times this; 0 or less: 10m)")
	fs.StringVar(&o.schedulerLease, "scheduler-lease", controller.DefaultSchedulerLease.String(), "Auto mode: namespace/name of kube-scheduler's leader-election Lease; while it shows no scheduler running for --auto-unbound-after, no node is left out of a pod's plans (a Lease that does not exist or cannot be read is not checked; empty: none)")
	fs.StringVar(&o.schedulerNames, "auto-scheduler-names", corev1.DefaultSchedulerName, "Auto mode: comma-separated spec.schedulerName values whose unschedulable pods are demand (kube-scheduler profiles: the planner allocates devices as kube-scheduler's DRA plugin does); a pod of another scheduler gets no GPU changed for it")
	fs.StringVar(&o.agentLeaseNamespace, "agent-lease-namespace", "", "namespace of the agents' heartbeat Leases (the agents' --lease-namespace): a node whose agent stops renewing its Lease is reported AgentLost and left out of Auto plans (empty: agents' liveness is not checked)")
	return o
}

// validate refuses flag values the controller could only fail on later
// (the manager's listeners and leader election once started) or would
// quietly replace, before the API server is contacted: an error names the
// flag and what it wants.
func (o *options) validate() error {
	if err := slices.ValidateDriverName(o.driverName); err != nil {
		return fmt.Errorf("--driver-name: %w", err)
	}
	if _, err := o.schedulerLeaseName(); err != nil {
		return err
	}
	if _, err := o.schedulerNameList(); err != nil {
		return err
	}
	if err := managerrun.ValidateNamespace("agent-lease-namespace", o.agentLeaseNamespace); err != nil {
		return err
	}
	if err := managerrun.ValidateNamespace("leader-election-namespace", o.leaderElectionNamespace); err != nil {
		return err
	}
	if err := managerrun.ValidateBindAddress("metrics-bind-address", o.metricsAddr); err != nil {
		return err
	}
	if err := managerrun.ValidateBindAddress("health-probe-bind-address", o.probeAddr); err != nil {
		return err
	}
	switch {
	case o.batchIdle <= 0:
		return fmt.Errorf("--auto-batch-idle=%s: want more than 0", o.batchIdle)
	case o.batchMax < o.batchIdle:
		return fmt.Errorf("--auto-batch-max=%s: want at least --auto-batch-idle=%s", o.batchMax, o.batchIdle)
	case o.readEvery < 0 || o.agingAfter < 0 || o.unboundAfter < 0:
		return fmt.Errorf("--auto-read-every=%s, --auto-aging-after=%s, --auto-unbound-after=%s: want 0 (off) or more", o.readEvery, o.agingAfter, o.unboundAfter)
	}
	// client-go's leader election refuses these only once the manager
	// starts (leaderelection.NewLeaderElector).
	if o.leaderElect {
		if errs := validation.IsDNS1123Subdomain(o.leaderElectionID); len(errs) > 0 {
			return fmt.Errorf("--leader-election-id=%q: not a Lease name: %s", o.leaderElectionID, strings.Join(errs, "; "))
		}
		switch {
		case o.retryPeriod <= 0:
			return fmt.Errorf("--leader-elect-retry-period=%s: want more than 0", o.retryPeriod)
		case o.leaseDuration < time.Second:
			// The Lease holds whole seconds (leaseDurationSeconds): 0,
			// which the API server refuses, so no replica would lead.
			return fmt.Errorf("--leader-elect-lease-duration=%s: want 1s or more (the Lease holds whole seconds, and the API server refuses 0)", o.leaseDuration)
		case o.leaseDuration <= o.renewDeadline:
			return fmt.Errorf("--leader-elect-lease-duration=%s: want more than --leader-elect-renew-deadline=%s", o.leaseDuration, o.renewDeadline)
		case float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod):
			return fmt.Errorf("--leader-elect-renew-deadline=%s: want more than %.1f × --leader-elect-retry-period=%s", o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod)
		}
	}
	return nil
}

// schedulerNameList is --auto-scheduler-names as a list: each name as the
// API server takes a pod's spec.schedulerName (a DNS subdomain), given
// once.
func (o *options) schedulerNameList() ([]string, error) {
	names := strings.Split(o.schedulerNames, ",")
	if err := controller.ValidateSchedulerNames(names); err != nil {
		return nil, fmt.Errorf("--auto-scheduler-names=%q: %w", o.schedulerNames, err)
	}
	return names, nil
}

// schedulerLeaseName is --scheduler-lease read as namespace/name; empty
// where none is given.
func (o *options) schedulerLeaseName() (types.NamespacedName, error) {
	if o.schedulerLease == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(o.schedulerLease, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--scheduler-lease=%q: want namespace/name of a Lease, e.g. %s", o.schedulerLease, controller.DefaultSchedulerLease)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// autoPlanner is the Auto planner the flags set up; a duration flag of 0
// that turns a check off becomes the planner's "never" (negative).
func (o *options) autoPlanner(leases *controller.AgentLeases) (*controller.AutoPlanner, error) {
	never := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	lease, err := o.schedulerLeaseName()
	if err != nil {
		return nil, err
	}
	schedulers, err := o.schedulerNameList()
	if err != nil {
		return nil, err
	}
	return &controller.AutoPlanner{Driver: o.driverName, Idle: o.batchIdle, Max: o.batchMax, ReadEvery: never(o.readEvery), AgingAfter: never(o.agingAfter),
		UnboundAfter: never(o.unboundAfter), DeclinedFor: o.declinedFor, SchedulerLease: lease, SchedulerNames: schedulers, AgentLeases: leases}, nil
}

// newScheme knows the built-in types and the miglayout API.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// reconcileTimeout bounds one Reconcile (its context): a pass takes well
// under a second, and waits requeue rather than block.
const reconcileTimeout = 5 * time.Minute

// managerOptions turns the flags into controller-runtime manager options.
func (o *options) managerOptions(scheme *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsopts.Options(o.metricsAddr, o.metricsSecure),
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		// A Reconcile stuck on a call that never answers would keep the
		// leader's Lease (renewed apart) while nothing is reconciled; its
		// context ends after reconcileTimeout, and the item is retried.
		Controller: config.Controller{ReconciliationTimeout: reconcileTimeout},
		Cache: cache.Options{
			ByObject: o.cacheByObject(),
			// Nothing reads managed fields; they are often the larger
			// part of a pod or claim.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
	}
}

// cacheByObject limits what the cache holds: ResourceSlices without the
// MIG devices of miglayout's own (controller.TrimResourceSlices: the Auto
// planner reads other drivers' devices, a NIC beside a MIG device, and of
// its own the whole GPUs it does not plan), pods not bound to a node only,
// without their bulk (controller.TrimPendingPod; the planner serves pods
// the scheduler could not place; a pod leaves the
// cache as it is bound: the Auto planner keeps the bound ones, trimmed to
// what it reads of them, in a cache of its own), and Leases of the agents'
// namespace only (not every kubelet's node Lease). Nodes are held without
// what nothing here reads (trimNode).
func (o *options) cacheByObject() map[client.Object]cache.ByObject {
	by := map[client.Object]cache.ByObject{
		&resourceapi.ResourceSlice{}: {Transform: controller.TrimResourceSlices(o.driverName, nil)},
		&corev1.Pod{}:                {Field: fields.OneTermEqualSelector("spec.nodeName", ""), Transform: controller.TrimPendingPod},
		&corev1.Node{}:               {Transform: trimNode},
	}
	if o.agentLeaseNamespace != "" {
		by[&coordinationv1.Lease{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.agentLeaseNamespace: {}}}
	}
	return by
}

// trimNode is the cache's transform of Nodes: the Auto planner reads a
// node's labels, taints, unschedulable flag and allocatable resources, the
// reconciler its labels; its container images (up to 50 per node), volumes,
// system info and managed fields, often most of the object, are dropped.
func trimNode(obj any) (any, error) {
	switch n := obj.(type) {
	case *corev1.Node:
		n.ManagedFields = nil
		n.Status.Images, n.Status.VolumesInUse, n.Status.VolumesAttached = nil, nil, nil
		n.Status.NodeInfo = corev1.NodeSystemInfo{}
	case *metav1.PartialObjectMetadata:
		// The reconciler's metadata-only informer of Nodes takes this
		// transform too (the cache's options are per GVK), which
		// replaces the cache's default stripping of managed fields.
		n.ManagedFields = nil
	}
	return obj, nil
}
