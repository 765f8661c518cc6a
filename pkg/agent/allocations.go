package agent

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClaimAllocations reads ResourceClaim allocations of one driver and pool
// (the node): through the manager's cache for routine checks, and straight
// from the API server (Live) for the re-check that guards a destroy.
type ClaimAllocations struct {
	Cached client.Reader
	Live   client.Reader
	Driver string
	Pool   string
}

// AllocatedDevices implements Allocations.
func (c *ClaimAllocations) AllocatedDevices(ctx context.Context, live bool) (sets.Set[string], error) {
	r := c.Cached
	if live {
		r = c.Live
	}
	var claims resourceapi.ResourceClaimList
	if err := r.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	return AllocatedIn(claims.Items, c.Driver, c.Pool), nil
}

// AllocatedIn returns the names of the devices of driver and pool that the
// claims' allocations reference.
func AllocatedIn(claims []resourceapi.ResourceClaim, driver, pool string) sets.Set[string] {
	out := sets.New[string]()
	for i := range claims {
		a := claims[i].Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if r.Driver == driver && r.Pool == pool {
				out.Insert(r.Device)
			}
		}
	}
	return out
}
