package agent

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/slices"
)

// AllocatedPoolIndex is the cache's field index of ResourceClaims by the
// pools their allocations name ("<driver>/<pool>", see AllocatedPools).
const AllocatedPoolIndex = "miglayout.io/allocated-pool"

// AllocatedPools is the AllocatedPoolIndex function: the "<driver>/<pool>"
// of each device the claim's allocation names, once each.
func AllocatedPools(o client.Object) []string {
	claim, ok := o.(*resourceapi.ResourceClaim)
	if !ok || claim.Status.Allocation == nil {
		return nil
	}
	keys := sets.New[string]()
	for _, r := range claim.Status.Allocation.Devices.Results {
		keys.Insert(r.Driver + "/" + r.Pool)
	}
	return sets.List(keys)
}

// ClaimAllocations reads ResourceClaim allocations of one driver and pool
// (the node): through the manager's cache for routine checks, and straight
// from the API server (Live) for the re-check that guards a destroy.
type ClaimAllocations struct {
	Cached client.Reader
	Live   client.Reader
	Driver string
	Pool   string
	// Indexed: Cached has AllocatedPoolIndex, so a cached read lists the
	// node's claims only, not every claim of the cluster.
	Indexed bool
	// Binding, when set, is the gate of devices published with binding
	// conditions: the live re-check leaves out a device whose every
	// allocation waits for a confirmation the gate will refuse (the device
	// is draining and no confirmation of it is being written), since the
	// scheduler never binds a pod to it.
	Binding *BindingGate
}

// AllocatedDevices implements Allocations.
func (c *ClaimAllocations) AllocatedDevices(ctx context.Context, live bool) (sets.Set[string], error) {
	if live {
		return c.read(ctx, true, true)
	}
	return c.read(ctx, false, false)
}

// indexed is the list option of a cached read: the node's claims by
// AllocatedPoolIndex where Cached has it.
func (c *ClaimAllocations) indexed() []client.ListOption {
	if !c.Indexed {
		return nil
	}
	return []client.ListOption{client.MatchingFields{AllocatedPoolIndex: c.Driver + "/" + c.Pool}}
}

// GuardedDevices is AllocatedDevices from the cache, less the devices whose
// every allocation waits for a confirmation the binding gate will refuse
// (as the live re-check leaves them out): the allocations that may still
// get a pod bound to the device. The repartitioner reads it under a GPU's
// lock, just before destroying devices.
func (c *ClaimAllocations) GuardedDevices(ctx context.Context) (sets.Set[string], error) {
	return c.read(ctx, false, true)
}

// read lists the claims from the API server (live: listLive) or the cache
// (the node's claims where it is indexed); with gated, it leaves out the
// devices whose every allocation waits for a confirmation the binding gate
// will refuse.
func (c *ClaimAllocations) read(ctx context.Context, live, gated bool) (sets.Set[string], error) {
	var refusable sets.Set[string]
	if gated && c.Binding != nil {
		refusable = c.Binding.Refusable() // before the read: see Refusable
	}
	var items []resourceapi.ResourceClaim
	if live {
		var err error
		if items, err = c.listLive(ctx); err != nil {
			return nil, err
		}
	} else {
		var claims resourceapi.ResourceClaimList
		if err := c.Cached.List(ctx, &claims, c.indexed()...); err != nil {
			return nil, fmt.Errorf("listing ResourceClaims: %w", err)
		}
		items = claims.Items
	}
	out := AllocatedIn(items, c.Driver, c.Pool)
	for dev := range awaitingBinding(items, c.Driver, c.Pool) {
		if refusable.Has(dev) {
			out.Delete(dev)
		}
	}
	return out, nil
}

// livePageSize is how many ResourceClaims one page of a live read holds.
const livePageSize = 500

// listLive lists every ResourceClaim from the API server (no field
// selector reaches allocations) in pages of livePageSize, one consistent
// snapshot, and keeps only those whose allocation names a device of the
// driver and pool: on a cluster of tens of thousands of claims the agent
// holds one page and its node's claims, not the whole list.
func (c *ClaimAllocations) listLive(ctx context.Context) ([]resourceapi.ResourceClaim, error) {
	var kept []resourceapi.ResourceClaim
	var page resourceapi.ResourceClaimList
	for {
		opts := []client.ListOption{client.Limit(livePageSize)}
		if page.Continue != "" {
			opts = append(opts, client.Continue(page.Continue))
		}
		page = resourceapi.ResourceClaimList{}
		if err := c.Live.List(ctx, &page, opts...); err != nil {
			return nil, fmt.Errorf("listing ResourceClaims: %w", err)
		}
		for i := range page.Items {
			for _, key := range AllocatedPools(&page.Items[i]) {
				if key == c.Driver+"/"+c.Pool {
					kept = append(kept, page.Items[i])
					break
				}
			}
		}
		if page.Continue == "" {
			return kept, nil
		}
	}
}

// awaitingBinding returns the devices of driver and pool whose every
// allocation carries slices.BindingConditionReady and is not confirmed in
// its claim's status: no pod is bound to them (yet).
func awaitingBinding(claims []resourceapi.ResourceClaim, driver, pool string) sets.Set[string] {
	waiting, bound := sets.New[string](), sets.New[string]()
	for i := range claims {
		a := claims[i].Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if r.Driver != driver || r.Pool != pool {
				continue
			}
			if slices.RequiresBinding(r) && !confirmed(&claims[i], driver, pool, r.Device) {
				waiting.Insert(r.Device)
			} else {
				bound.Insert(r.Device)
			}
		}
	}
	return waiting.Difference(bound)
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
