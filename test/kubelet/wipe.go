package kubelet

import (
	"context"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultSliceWipeDelay is how long a DRA driver may stay unusable (its
// plugin deregistered or its gRPC connection down) before the kubelet deletes
// the driver's ResourceSlices of the node: the kubelet's own delay
// (defaultWipingDelay in kubelet 1.37's pkg/kubelet/cm/dra/manager.go).
const DefaultSliceWipeDelay = 30 * time.Second

// wipeSlices deletes the node's ResourceSlices, of driver only where it is not
// empty, as the kubelet does when it starts (all drivers: none is usable
// before it registers again) and when a driver stayed unusable for the wipe
// delay. It retries with exponential backoff (1 s doubling to 5 min, as the
// kubelet does) until it succeeds or ctx ends.
func (k *Kubelet) wipeSlices(ctx context.Context, driver string) {
	selector := fields.Set{resourceapi.ResourceSliceSelectorNodeName: k.cfg.NodeName}
	if driver != "" {
		selector[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 100}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := k.client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: selector.String()})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			k.logger.Info("Deleted the node's ResourceSlices", "fieldSelector", selector.String())
			k.wipes.Add(1)
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		default:
			k.logger.Info("Deleting the node's ResourceSlices failed; retrying", "fieldSelector", selector.String(), "err", err)
			return false, nil
		}
	})
}

// SliceWipes returns how many times the kubelet deleted the node's
// ResourceSlices (at its start, and for each driver that stayed unusable for
// the wipe delay).
func (k *Kubelet) SliceWipes() int64 { return k.wipes.Load() }
