package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// sliceDeleted passes ResourceSlice deletions only (wipedToNode).
var sliceDeleted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// wipedToNode maps the deletion of a ResourceSlice of the node's pool to a
// pass where no slice of the pool is left in the cache (which holds the
// node's slices of the driver only, see CacheOptions): the pass publishes
// the pool, and the kubeletplugin helper's ResourceSlice controller writes
// it at once. Beside the pass, the republisher publishes the last
// publication again (Republisher), so that the pool is back at once even
// where a pass is under way (a drain's settle period, NVML calls): the pass
// that follows publishes what NVML then holds. The kubelet deletes the node's
// ResourceSlices when it starts
// (no driver is usable until its plugin registers again, a moment later)
// and a driver's once the driver stayed unusable for 30 s
// (defaultWipingDelay, kubelet 1.37's pkg/kubelet/cm/dra); an operator may
// delete them by hand. Without a pass, the ResourceSlice controller
// would write them again only after its sync delay
// (resourceslice.DefaultSyncDelay, 30 s) or the next resync, and
// meanwhile the scheduler would see none of the node's devices. The
// agent's own publications never leave the pool without a slice (an empty
// pool is one slice without devices), so they cause no pass. Each pool
// found deleted is counted (miglayout_agent_pool_deletions_total). A pool
// deleted with the Node (the cache has no Node of the name) is not
// published again at once: its slices would be collected again at once
// (the ResourceSlice controller's sync delay and the passes still write
// them, less often).
func (r *NodeReconciler) wipedToNode(ctx context.Context, o client.Object) []reconcile.Request {
	driver := r.Repartitioner.driver()
	s, ok := o.(*resourceapi.ResourceSlice)
	if !ok || s.Spec.Driver != driver || s.Spec.Pool.Name != r.NodeName {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("node", r.NodeName, "resourceSlice", s.Name)
	var list resourceapi.ResourceSliceList
	if err := r.Client.List(ctx, &list); err != nil {
		// Unknown: a pass that publishes an unchanged pool costs little.
		logger.Error(err, "Listing the node's ResourceSlices after one was deleted; publishing the pool again")
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.NodeName}}}
	}
	for _, other := range list.Items {
		if other.Spec.Driver == driver && other.Spec.Pool.Name == r.NodeName {
			return nil
		}
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &node); apierrors.IsNotFound(err) {
		// Deleted with their owner, the Node: published again, they would
		// name the Node gone as their owner and be collected again, over
		// and over, until the agent's pod goes too. The kubelet makes the
		// Node again only when it restarts, and the agent restarts then
		// (checkNode).
		logger.Info("The node's ResourceSlices were deleted with its Node; not publishing them again while the Node is gone")
		return nil
	}
	r.Repartitioner.Metrics.countPoolDeleted()
	logger.Info("The node's ResourceSlices were deleted (by the kubelet at its start or after the DRA plugin was unreachable, or by hand); publishing the pool again")
	if _, ok := r.Repartitioner.Inventory.(Republisher); ok {
		select {
		case r.republishChan() <- struct{}{}:
		default: // one is pending already
		}
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.NodeName}}}
}

// republishChan holds the republisher's pending work (buffered, capacity 1):
// deletions found while a Republish runs ask for one more after it, not one
// each.
func (r *NodeReconciler) republishChan() chan struct{} {
	r.republishOnce.Do(func() { r.republish = make(chan struct{}, 1) })
	return r.republish
}

// republisher returns the runnable that runs rp's Republish each time
// wipedToNode found the node's pool deleted, one at a time, until its
// context ends, and tells each in a PoolDeleted event.
func (r *NodeReconciler) republisher(rp Republisher) func(context.Context) error {
	return func(ctx context.Context) error {
		logger := klog.FromContext(ctx).WithValues("node", r.NodeName)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-r.republishChan():
			}
			start := time.Now()
			handed, err := rp.Republish(ctx)
			if ctx.Err() != nil {
				return nil
			}
			r.poolDeletedEvent(ctx, handed, err, time.Since(start))
			switch {
			case err != nil:
				logger.Error(err, "Publishing the pool again; the pass will")
			case handed:
				logger.V(2).Info("Published the pool again as last published; a pass follows", "took", time.Since(start))
			}
		}
	}
}

// poolDeletedEvent records EventPoolDeleted on the node's NodeMigLayout for a
// Republish that took took (until the API server served the pool, checked
// every RepublishRetry) and ended with handed and err; none where
// nothing was handed (no publication yet: the first pass publishes) or the
// NodeMigLayout cannot be read.
func (r *NodeReconciler) poolDeletedEvent(ctx context.Context, handed bool, err error, took time.Duration) {
	if r.Recorder == nil || !handed {
		return
	}
	var nml v1alpha1.NodeMigLayout
	if r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &nml) != nil {
		return
	}
	const deleted = "The node's ResourceSlices were deleted (by the kubelet at its start, after its DRA plugin was unreachable for 30s, or by hand), so no pod could be given a device of the node"
	if err != nil {
		r.Recorder.Eventf(&nml, nil, corev1.EventTypeWarning, EventPoolDeleted, "PublishPool", "%s", truncate(
			fmt.Sprintf("%s; publishing the pool again failed: %v; the next pass publishes it", deleted, err), maxEventNote))
		return
	}
	r.Recorder.Eventf(&nml, nil, corev1.EventTypeNormal, EventPoolDeleted, "PublishPool", "%s; published the pool again, served by the API server within %s",
		deleted, took.Round(time.Millisecond))
}
