package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// writeStatus applies the observation to the MigLayout's status and writes
// it when it changed, retrying on write conflicts with a fresh copy. It
// returns the status it replaced, or nil when it wrote nothing, so that
// events are derived from what the API server really held before.
//
// The MigLayout as the cache has it (ml) is trusted only once the cache
// shows the last status this reconciler wrote or read live (statusSeen):
// a status written from a pass and undone by the next (a GPU Draining,
// then Ready again) would otherwise compare equal to the cache's older
// copy and stay written, with no event to correct it (status writes wake
// no reconcile).
func (r *Reconciler) writeStatus(ctx context.Context, ml *v1alpha1.MigLayout, obs Observation) (*v1alpha1.MigLayoutStatus, error) {
	cur := ml.DeepCopy()
	first := !r.statusBehind(ml)
	var replaced *v1alpha1.MigLayoutStatus
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		replaced = nil
		if !first {
			reader := r.APIReader
			if reader == nil {
				reader = r.Client
			}
			cur = &v1alpha1.MigLayout{}
			if err := reader.Get(ctx, client.ObjectKeyFromObject(ml), cur); err != nil {
				return err
			}
			if cur.Generation != obs.Generation {
				// The spec changed meanwhile; the next reconcile describes it.
				return nil
			}
		}
		live := !first
		first = false
		next := cur.DeepCopy()
		ApplyStatus(&next.Status, obs)
		if equality.Semantic.DeepEqual(cur.Status, next.Status) {
			if live {
				r.sawStatus(cur)
			}
			return nil
		}
		if err := r.Client.Status().Update(ctx, next); err != nil {
			return err
		}
		r.sawStatus(next)
		replaced = &cur.Status
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing the status of MigLayout %s: %w", ml.Name, err)
	}
	return replaced, nil
}

// statusBehind reports whether the cache's copy of ml may be older than
// the last status this reconciler wrote or read live: its resourceVersion
// is another. Nothing recorded (a new leader) trusts the cache.
func (r *Reconciler) statusBehind(ml *v1alpha1.MigLayout) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, ok := r.statusSeen[ml.Name]
	return ok && seen.uid == ml.UID && seen.resourceVersion != ml.ResourceVersion
}

// sawStatus records ml as the last MigLayout this reconciler wrote the
// status of or read live.
func (r *Reconciler) sawStatus(ml *v1alpha1.MigLayout) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statusSeen == nil {
		r.statusSeen = map[string]seenVersion{}
	}
	r.statusSeen[ml.Name] = seenVersion{uid: ml.UID, resourceVersion: ml.ResourceVersion}
}

// seenVersion is one object's resourceVersion, with its UID.
type seenVersion struct {
	uid             types.UID
	resourceVersion string
}
