package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// writeStatus applies the observation to the MigLayout's status and writes
// it when it changed, retrying on write conflicts with a fresh copy. It
// returns the status it replaced, or nil when it wrote nothing, so that
// events are derived from what the API server really held before.
func (r *Reconciler) writeStatus(ctx context.Context, ml *v1alpha1.MigLayout, obs Observation) (*v1alpha1.MigLayoutStatus, error) {
	cur := ml.DeepCopy()
	first := true
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
		first = false
		next := cur.DeepCopy()
		ApplyStatus(&next.Status, obs)
		if equality.Semantic.DeepEqual(cur.Status, next.Status) {
			return nil
		}
		if err := r.Client.Status().Update(ctx, next); err != nil {
			return err
		}
		replaced = &cur.Status
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing the status of MigLayout %s: %w", ml.Name, err)
	}
	return replaced, nil
}
