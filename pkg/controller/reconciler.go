package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// RBAC of the Reconciler (miglayouts/finalizers: owner references with
// blockOwnerDeletion on NodeMigLayouts).
// +kubebuilder:rbac:groups=miglayout.io,resources=miglayouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=miglayout.io,resources=miglayouts/status,verbs=update;patch
// +kubebuilder:rbac:groups=miglayout.io,resources=miglayouts/finalizers,verbs=update
// +kubebuilder:rbac:groups=miglayout.io,resources=nodemiglayouts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler reconciles one MigLayout: it resolves the nodes it selects,
// writes the spec of their NodeMigLayouts (Static mode) and aggregates the
// agents' reports into the MigLayout's status.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader, when set, reads around the cache: a NodeMigLayout after
	// a write conflict, and the MigLayout before a write that starts or
	// drops a change (switchedSince).
	APIReader client.Reader
	// Scheme knows the API types (for owner references).
	Scheme *runtime.Scheme
	// Recorder records events on MigLayouts; SetupWithManager wraps it in
	// eventnote.Distinct, so that an event with a new note is never folded
	// into the series of an earlier one.
	Recorder events.EventRecorder
	// Catalog holds the GPU models; nil means mig.DefaultCatalog().
	Catalog *mig.Catalog
	// AgentLeases judges the agents' heartbeats; nil checks none.
	AgentLeases *AgentLeases
	// Now is the clock that ages GPUs whose passes fail
	// (PassesFailingAfter, failingPasses); nil is time.Now.
	Now func() time.Time

	// rollouts are the spec writes under maxNodesChanging the cache may
	// not show yet.
	rollouts rolloutExpectations
	// failing is since when each GPU's passes have failed.
	failing failingPasses
	// uuidsDroppedAt is when the API server last stored a NodeMigLayout
	// spec without the GPUs' UUIDs its entries were written with (its CRD
	// is of an earlier release: checkUUIDsKept), in Unix nanoseconds; 0
	// for never.
	uuidsDroppedAt atomic.Int64

	mu sync.Mutex
	// problems are, per MigLayout name, the problems present at its last
	// status write (see Transitions), with the UID of the MigLayout they
	// were seen on.
	problems map[string]seenProblems
	// specProblems are, per MigLayout name, the spec problems found when
	// every node it manages had last reported (specProblemsOf).
	specProblems map[string]keptSpecProblems
	// statusSeen is, per MigLayout name, the version of it whose status
	// this reconciler last wrote or read live (writeStatus).
	statusSeen map[string]seenVersion
}

type seenProblems struct {
	uid  types.UID
	keys sets.Set[string]
}

// keptSpecProblems are the spec problems last found on a MigLayout
// generation, with every node it manages reported.
type keptSpecProblems struct {
	uid        types.UID
	generation int64
	problems   []SpecProblem
}

// waitForDeletion is how soon a reconcile that waits for a NodeMigLayout to
// go away looks again (its deletion also triggers a reconcile).
const waitForDeletion = 5 * time.Second

// Reconcile brings one MigLayout's nodes and status up to date. Errors are
// returned so that controller-runtime requeues with its backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := klog.FromContext(ctx)
	ctx = withLiveCheck(ctx)
	var ml v1alpha1.MigLayout
	if err := r.Client.Get(ctx, req.NamespacedName, &ml); err != nil {
		if apierrors.IsNotFound(err) {
			gone, err := r.releaseDeleted(ctx, req.Name)
			if gone {
				forgetMetrics(req.Name)
				r.forgetProblems(req.Name)
				r.failing.forgetLayout(req.Name)
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, fmt.Errorf("getting MigLayout %s: %w", req.Name, err)
	}
	in, err := r.observe(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ml.DeletionTimestamp != nil {
		return ctrl.Result{}, r.releaseDeleting(ctx, &ml, in)
	}
	obs := Observation{Generation: ml.Generation, Mode: ml.Spec.Mode, Paused: ml.Spec.Paused}
	obs.Selection, obs.SelectorErr = SelectNodes(&ml, in.migLayouts, in.nodes)
	obs.Selection = HeldByInvalidSelectors(&ml, obs.Selection, in.migLayouts, in.nodeMigLayouts)
	var result ctrl.Result
	if obs.SelectorErr != nil {
		obs.Selection = ConflictsOfHeld(&ml, in.migLayouts, in.nodes, in.nodeMigLayouts)
		obs.HeldChanging, result.RequeueAfter = r.heldChanging(&ml, obs.Selection, in)
	}
	var errs []error
	if obs.SelectorErr != nil {
		// Whatever the selector meant, a node deleted is not selected:
		// its NodeMigLayout goes, so that a node made again under the
		// name is not held by what this MigLayout wrote for the old one.
		errs = append(errs, r.release(ctx, &ml, Selection{Nodes: heldExisting(in)}, in)...)
	}
	if obs.SelectorErr == nil {
		obs.Nodes, result, errs = r.syncNodes(ctx, &ml, obs.Selection, in)
		obs.SpecProblems = r.specProblemsOf(&ml, SelectedInventory(obs.Selection, in.nodeMigLayouts), ReportedInventory(obs.Selection, in.nodeMigLayouts))
		if len(obs.Nodes) == 0 {
			obs.SpecProblems = append(obs.SpecProblems, noNodesProblem)
		}
	} else if ml.Spec.Paused {
		// The nodes it holds are left as they are: paused, not even a
		// change written before the pause starts; unless the MigLayout
		// was resumed (or its selector fixed) since the cache's copy,
		// read live only where there is a change to drop.
		for _, name := range heldExisting(in) { // the others were released above
			if _, drops := unstartedToDrop(&ml, in.nodeMigLayouts[name], dropForPause); !drops {
				continue
			}
			if switched, err := r.switchedSince(ctx, &ml); err != nil {
				errs = append(errs, err)
				break
			} else if switched {
				result.RequeueAfter = waitForDeletion
				break
			}
			if err := r.dropUnstartedOwned(ctx, &ml, in.nodeMigLayouts[name], dropForPause); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		// A node it holds that another MigLayout selects is left as it
		// is, as both report: a change not started yet is dropped.
		conflicted := sets.New[string]()
		for _, nodes := range obs.Selection.Conflicts {
			conflicted.Insert(nodes...)
		}
		for _, name := range sets.List(conflicted) {
			if err := r.dropUnstartedOwned(ctx, &ml, in.nodeMigLayouts[name], dropForConflict); err != nil {
				errs = append(errs, err)
			}
		}
	}
	logger.V(4).Info("Observed MigLayout", "selected", len(obs.Selection.Nodes), "conflicts", len(obs.Selection.Conflicts))

	replaced, err := r.writeStatus(ctx, &ml, obs)
	if err != nil {
		return ctrl.Result{}, errors.Join(append(errs, err)...)
	}
	if replaced == nil {
		// Nothing written: the status is as computed, and only what
		// Transitions remembers beyond it (problems, and nodes without
		// a row) can have changed: a node beyond the rows that became
		// Ready while another went not Ready leaves the rows as they
		// were.
		replaced = ml.Status.DeepCopy()
		ApplyStatus(replaced, obs)
	}
	r.mu.Lock()
	if r.problems == nil {
		r.problems = map[string]seenProblems{}
	}
	var seen sets.Set[string]
	if p, ok := r.problems[ml.Name]; ok && p.uid == ml.UID {
		seen = p.keys
	}
	evts, now := Transitions(replaced, obs, seen)
	r.problems[ml.Name] = seenProblems{uid: ml.UID, keys: now}
	r.mu.Unlock()
	r.record(&ml, evts)
	recordMetrics(ml.Name, obs)
	return result, errors.Join(errs...)
}

// forgetProblems drops what was remembered of a deleted MigLayout.
func (r *Reconciler) forgetProblems(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.problems, name)
	delete(r.specProblems, name)
	delete(r.statusSeen, name)
}

// specProblemsOf is CheckSpec of ml on inventory (SelectedInventory). While
// a node it manages has not reported (inventory nil: a node just selected,
// a NodeMigLayout made again), the problems found on the same generation
// when every node had reported are kept, those that still hold on the
// nodes that have reported (reported, by Reason and Subject): a rule is
// judged on every node it is written for, and dropping them would clear
// Degraded and raise it again, with its warning, each time a node joins.
func (r *Reconciler) specProblemsOf(ml *v1alpha1.MigLayout, inventory, reported map[string][]v1alpha1.GPUStatus) []SpecProblem {
	r.mu.Lock()
	defer r.mu.Unlock()
	if inventory == nil {
		k, ok := r.specProblems[ml.Name]
		if !ok {
			return reportedSpecProblems(ml, CheckSpec(r.catalog(), &ml.Spec, reported))
		}
		if k.uid != ml.UID || k.generation != ml.Generation || len(k.problems) == 0 {
			return nil
		}
		still := CheckSpec(r.catalog(), &ml.Spec, reported)
		return slices.DeleteFunc(slices.Clone(k.problems), func(p SpecProblem) bool {
			return !slices.ContainsFunc(still, func(q SpecProblem) bool { return q.Reason == p.Reason && q.Subject == p.Subject })
		})
	}
	problems := CheckSpec(r.catalog(), &ml.Spec, inventory)
	if r.specProblems == nil {
		r.specProblems = map[string]keptSpecProblems{}
	}
	r.specProblems[ml.Name] = keptSpecProblems{uid: ml.UID, generation: ml.Generation, problems: problems}
	return problems
}

// reportedSpecProblems are the problems of still (CheckSpec on the nodes
// that have reported) that ml's Degraded condition, written for its
// generation, names: what a process that starts (a restart, a new leader)
// while a node has not reported knows of the problems found before, which
// were kept in the memory of the process that found them. A problem is
// named where the condition's message has its subject as a message of it
// begins ("rule \"halves\" matches no GPU", "3g.40gb is offered by ...").
func reportedSpecProblems(ml *v1alpha1.MigLayout, still []SpecProblem) []SpecProblem {
	c := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ml.Generation {
		return nil
	}
	return slices.DeleteFunc(still, func(p SpecProblem) bool {
		return p.Subject == "" || !strings.Contains(c.Message, p.Subject+" ")
	})
}

// inputs are the cluster objects one reconcile looks at.
type inputs struct {
	migLayouts     []v1alpha1.MigLayout
	nodes          map[string]map[string]string
	nodeMigLayouts map[string]*v1alpha1.NodeMigLayout
	// leases are the agents' heartbeat Leases by node (nil when
	// AgentLeases is nil).
	leases map[string]*coordinationv1.Lease
}

func (r *Reconciler) observe(ctx context.Context) (inputs, error) {
	var mls v1alpha1.MigLayoutList
	if err := r.Client.List(ctx, &mls); err != nil {
		return inputs{}, fmt.Errorf("listing MigLayouts: %w", err)
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, nodes); err != nil {
		return inputs{}, fmt.Errorf("listing Nodes: %w", err)
	}
	var nmls v1alpha1.NodeMigLayoutList
	if err := r.Client.List(ctx, &nmls); err != nil {
		return inputs{}, fmt.Errorf("listing NodeMigLayouts: %w", err)
	}
	leases, err := r.AgentLeases.List(ctx, r.Client)
	if err != nil {
		return inputs{}, err
	}
	in := inputs{
		leases:         leases,
		migLayouts:     mls.Items,
		nodes:          make(map[string]map[string]string, len(nodes.Items)),
		nodeMigLayouts: make(map[string]*v1alpha1.NodeMigLayout, len(nmls.Items)),
	}
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			in.nodes[n.Name] = n.Labels
		}
	}
	names := make([]string, len(nmls.Items))
	for i := range nmls.Items {
		in.nodeMigLayouts[nmls.Items[i].Name] = &nmls.Items[i]
		names[i] = nmls.Items[i].Name
	}
	r.AgentLeases.Retain(names)
	return in, nil
}

func (r *Reconciler) catalog() *mig.Catalog {
	if r.Catalog != nil {
		return r.Catalog
	}
	return mig.DefaultCatalog()
}

func (r *Reconciler) record(ml *v1alpha1.MigLayout, evts []Event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range evts {
		var related runtime.Object
		if e.Node != "" {
			related = nodeMigLayoutRef(e.Node)
		}
		r.Recorder.Eventf(ml, related, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}

// releaseDeleting releases the nodes of a MigLayout being deleted that
// finalizers hold (a GitOps tool's, or the garbage collector's own for a
// foreground deletion): garbage collection deletes its NodeMigLayouts only
// once it is gone, and until then their agents would carry out a change
// not yet made that nothing asks for any more. Deleted with
// --cascade=orphan (the orphan finalizer), its NodeMigLayouts are kept, as
// asked.
func (r *Reconciler) releaseDeleting(ctx context.Context, ml *v1alpha1.MigLayout, in inputs) error {
	if slices.Contains(ml.Finalizers, metav1.FinalizerOrphanDependents) {
		return nil
	}
	if errs := r.release(ctx, ml, Selection{}, in); len(errs) > 0 {
		return fmt.Errorf("releasing the nodes of MigLayout %s, being deleted: %w", ml.Name, errors.Join(errs...))
	}
	return nil
}

// releaseDeleted deletes the NodeMigLayouts (in the cache) still
// controlled by the MigLayout name, deleted in the cache: the garbage
// collector would delete them too, since they carry its owner reference,
// but only once kube-controller-manager gets to it, and meanwhile their
// agents would go on with changes no MigLayout asks for. The API server is
// read first (APIReader; nothing is deleted without it): the cache may lag
// a MigLayout made again under the name, whose NodeMigLayouts it may show
// already. gone reports whether the MigLayout is gone there (true without
// a live reader), so that what the controller keeps of it may go too.
// Deleted as release does, with the UID and resourceVersion the cache
// shows, only those whose owner is not the MigLayout the API server has. A
// deletion that orphaned them (--cascade=orphan) took the owner reference
// off first.
func (r *Reconciler) releaseDeleted(ctx context.Context, name string) (gone bool, err error) {
	if r.APIReader == nil {
		return true, nil // the garbage collector's, then
	}
	var live v1alpha1.MigLayout
	switch err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &live); {
	case apierrors.IsNotFound(err):
		gone = true
	case err != nil:
		return false, fmt.Errorf("reading MigLayout %s, deleted in the cache: %w", name, err)
	}
	var nmls v1alpha1.NodeMigLayoutList
	if err := r.Client.List(ctx, &nmls); err != nil {
		return gone, fmt.Errorf("listing NodeMigLayouts of MigLayout %s, deleted: %w", name, err)
	}
	var errs []error
	for i := range nmls.Items {
		nml := &nmls.Items[i]
		ref := metav1.GetControllerOf(nml)
		if ref == nil || ref.APIVersion != v1alpha1.GroupVersion.String() || ref.Kind != "MigLayout" || ref.Name != name || nml.DeletionTimestamp != nil {
			continue
		}
		if !gone && ref.UID == live.UID {
			continue // the MigLayout is there: the cache lags it
		}
		uid, rv := nml.UID, nml.ResourceVersion
		if err := r.Client.Delete(ctx, nml, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting NodeMigLayout %s of MigLayout %s, deleted: %w", nml.Name, name, err))
			continue
		}
		writesMetric.WithLabelValues("delete").Inc()
		r.AgentLeases.Forget(nml.Name)
		r.failing.forget(nml.Name, name)
		klog.FromContext(ctx).V(2).Info("Deleted NodeMigLayout of a deleted MigLayout", "node", nml.Name, "migLayout", name)
	}
	return gone, errors.Join(errs...)
}

// heldExisting are the names, sorted, of the NodeMigLayouts of in whose
// Node exists (and is not being deleted).
func heldExisting(in inputs) []string {
	var out []string
	for _, name := range sortedKeys(in.nodeMigLayouts) {
		if _, ok := in.nodes[name]; ok {
			out = append(out, name)
		}
	}
	return out
}
