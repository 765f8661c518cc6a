package controller

import (
	"context"
	"maps"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
)

// Name is the controller's name: in logs, metrics and as the events'
// reporting controller.
const Name = "miglayout-controller"

// SetupWithManager fills the Reconciler's unset fields from mgr and registers
// it with these watches:
//   - MigLayouts (spec changes, creation, deletion): that MigLayout, and every
//     other one, since selector overlaps are between MigLayouts;
//   - Nodes (metadata only; creation, deletion, changes of a label some
//     MigLayout's node selector names: selectorLabelChanged): the
//     MigLayouts that select the node, before or after, or control its
//     NodeMigLayout (nodeMigLayouts);
//   - NodeMigLayouts (any change, the agent's status above all): the
//     MigLayout that controls it;
//   - with AgentLeases, the agents' heartbeat Leases (created, deleted,
//     renewed after a gap: agentLeaseChange): the MigLayouts that select
//     its node or control the node's NodeMigLayout. A Lease's
//     expiry has no event: each reconcile asks to look again when the
//     first of its nodes' live agents would be lost.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(Name)
	}
	r.Recorder = eventnote.Distinct(r.Recorder)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("miglayout").
		WithOptions(controller.Options{RateLimiter: failureRateLimiter()}).
		For(&v1alpha1.MigLayout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&v1alpha1.NodeMigLayout{}).
		Watches(&v1alpha1.NodeMigLayout{}, handler.EnqueueRequestsFromMapFunc(r.gatingMigLayouts)).
		Watches(&v1alpha1.MigLayout{}, handler.EnqueueRequestsFromMapFunc(r.allMigLayouts),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeMigLayouts),
			builder.OnlyMetadata, builder.WithPredicates(predicate.Funcs{UpdateFunc: r.selectorLabelChanged}))
	if r.AgentLeases != nil {
		b = b.Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.nodeMigLayouts),
			builder.WithPredicates(agentLeaseChange(r.AgentLeases.Namespace)))
	}
	return b.Complete(r)
}

// selectorLabelChanged passes a Node update that changes a label some
// MigLayout's node selector names (matchLabels or matchExpressions keys):
// labels nothing selects by (GPU feature discovery rewrites a timestamp
// label every minute on every GPU node) wake no reconcile of every
// MigLayout. A MigLayout created or changed to select by another key is
// reconciled for that change itself. Where the MigLayouts cannot be listed,
// it passes.
func (r *Reconciler) selectorLabelChanged(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	if e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
		return true // a node being deleted (a finalizer holds it) is selected no more
	}
	o, n := e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()
	if maps.Equal(o, n) {
		return false
	}
	var mls v1alpha1.MigLayoutList
	if err := r.Client.List(context.Background(), &mls, client.UnsafeDisableDeepCopy); err != nil {
		return true
	}
	return labelsChanged(o, n, selectorLabelKeys(mls.Items))
}

// allMigLayouts maps any event to every MigLayout. There are few MigLayouts,
// and which of them a node or another MigLayout concerns depends on all
// their selectors.
//
// The event handlers list the cache's MigLayouts without copying them
// (client.UnsafeDisableDeepCopy) and only read them: a copy of every
// MigLayout, status rows included, per Node update would cost milliseconds
// at a few hundred MigLayouts, for each of a large cluster's many label
// updates a second.
func (r *Reconciler) allMigLayouts(ctx context.Context, _ client.Object) []reconcile.Request {
	var mls v1alpha1.MigLayoutList
	if err := r.Client.List(ctx, &mls, client.UnsafeDisableDeepCopy); err != nil {
		klog.FromContext(ctx).Error(err, "Listing MigLayouts to map an event")
		return nil
	}
	reqs := make([]reconcile.Request, len(mls.Items))
	for i, ml := range mls.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: ml.Name}}
	}
	return reqs
}

// nodeMigLayouts maps an event of a Node, or of its agent's heartbeat
// Lease, to the MigLayouts it concerns: those whose node selector matches
// the node's labels (the event's Node's: for an update, the old and the
// new labels each, controller-runtime mapping both objects; for a Lease,
// the cached Node's), and the one that controls the node's NodeMigLayout
// (it selected the node before, or holds it with a selector that does not
// parse). Any other MigLayout neither selects the node nor conflicts with
// one that does. A Node joining or leaving a large cluster wakes a few
// MigLayouts, not all, each of whose reconciles reads every node. Where
// the MigLayouts cannot be listed, it maps to none (logged), as
// allMigLayouts does.
func (r *Reconciler) nodeMigLayouts(ctx context.Context, obj client.Object) []reconcile.Request {
	logger := klog.FromContext(ctx)
	name, nodeLabels, known := obj.GetName(), obj.GetLabels(), true
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		name = v1alpha1.AgentLeaseNode(lease)
		if name == "" {
			return nil
		}
		node := &metav1.PartialObjectMetadata{}
		node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node); {
		case apierrors.IsNotFound(err):
			known = false
		case err != nil:
			logger.Error(err, "Reading a node to map its agent Lease's event", "node", name)
			return r.allMigLayouts(ctx, obj)
		default:
			nodeLabels = node.Labels
		}
	}
	var mls v1alpha1.MigLayoutList
	if err := r.Client.List(ctx, &mls, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Listing MigLayouts to map an event", "node", name)
		return nil
	}
	var owner string
	nml := &v1alpha1.NodeMigLayout{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, nml); {
	case err == nil:
		if ref := metav1.GetControllerOf(nml); ref != nil {
			owner = ref.Name
		}
	case !apierrors.IsNotFound(err):
		logger.Error(err, "Reading a NodeMigLayout to map an event", "node", name)
		return r.allMigLayouts(ctx, obj)
	}
	var reqs []reconcile.Request
	for i := range mls.Items {
		ml := &mls.Items[i]
		concerned := ml.Name == owner
		if !concerned && known {
			sel, err := selector(ml)
			concerned = err == nil && sel.Matches(labels.Set(nodeLabels))
		}
		if concerned {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ml.Name}})
		}
	}
	return reqs
}

// gatingMigLayouts maps a NodeMigLayout's event to the MigLayouts, other
// than the one that controls it, whose maxNodesChanging counts its node:
// those that select the node (in conflict with its owner). Such a node
// holds a place of theirs while it changes, so a node it held back is
// given its layout once it is done.
func (r *Reconciler) gatingMigLayouts(ctx context.Context, obj client.Object) []reconcile.Request {
	logger := klog.FromContext(ctx)
	var mls v1alpha1.MigLayoutList
	if err := r.Client.List(ctx, &mls, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Listing MigLayouts to map a NodeMigLayout event")
		return nil
	}
	owner := metav1.GetControllerOf(obj)
	var gated []*v1alpha1.MigLayout
	for i := range mls.Items {
		ml := &mls.Items[i]
		if ml.Spec.MaxNodesChanging != nil && (owner == nil || owner.UID != ml.UID) {
			gated = append(gated, ml)
		}
	}
	if len(gated) == 0 {
		return nil
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if err := r.Client.Get(ctx, types.NamespacedName{Name: obj.GetName()}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Error(err, "Reading a node to map its NodeMigLayout's event", "node", obj.GetName())
		}
		return nil
	}
	var reqs []reconcile.Request
	for _, ml := range gated {
		sel, err := selector(ml)
		if err == nil && sel.Matches(labels.Set(node.Labels)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ml.Name}})
		}
	}
	return reqs
}

// maxFailureBackoff caps the delay before retrying a reconcile that failed.
// controller-runtime ignores a failed reconcile's RequeueAfter, and its
// default backoff grows to 1000 s, while a reconcile is also what notices
// an agent's heartbeat Lease running out: a MigLayout whose status or one
// node's spec cannot be written keeps being looked at every 30 s at most.
const maxFailureBackoff = 30 * time.Second

// failureRateLimiter is controller-runtime's default rate limiter with the
// per-item backoff capped at maxFailureBackoff.
func failureRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxFailureBackoff),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
