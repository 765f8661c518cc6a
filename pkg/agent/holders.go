package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// AllocationHolders is an Allocations that can also name, from its cache,
// the ResourceClaims (and their pods) that hold devices: the message of a
// GPU Blocked on a device in use says who holds it.
type AllocationHolders interface {
	// Holders returns, for each of devices that a ResourceClaim
	// allocation of this driver and pool references, the claims that
	// reference it, each as "ResourceClaim <namespace>/<name>", followed by
	// " (pod <name>, ...)" where pods reserve it.
	Holders(ctx context.Context, devices sets.Set[string]) (map[string][]string, error)
}

// Holders implements AllocationHolders from the cache.
func (c *ClaimAllocations) Holders(ctx context.Context, devices sets.Set[string]) (map[string][]string, error) {
	var claims resourceapi.ResourceClaimList
	if err := c.Cached.List(ctx, &claims, c.indexed()...); err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	out := map[string][]string{}
	for i := range claims.Items {
		claim := &claims.Items[i]
		held := AllocatedIn(claims.Items[i:i+1], c.Driver, c.Pool).Intersection(devices)
		if held.Len() == 0 {
			continue
		}
		who := fmt.Sprintf("ResourceClaim %s/%s", claim.Namespace, claim.Name)
		var pods []string
		for _, r := range claim.Status.ReservedFor {
			if r.Resource == "pods" {
				pods = append(pods, r.Name)
			}
		}
		if len(pods) > maxHolderPods {
			pods = append(pods[:maxHolderPods], fmt.Sprintf("%d more", len(pods)-maxHolderPods))
		}
		if len(pods) > 0 {
			who += fmt.Sprintf(" (pod %s)", strings.Join(pods, ", "))
		}
		for dev := range held {
			out[dev] = append(out[dev], who)
		}
	}
	for _, h := range out {
		slices.Sort(h)
	}
	return out, nil
}

// maxHolderNotes bounds how many devices holdersNote names, and
// maxHolderPods how many pods of a claim Holders names.
const maxHolderNotes, maxHolderPods = 4, 3

// holdersNote is the end of a DeviceInUse message for busy, naming the
// claims that hold each device (AllocationHolders, where r.Allocations has
// it): "; gpu-0-mig-3g40gb-9-0 is held by ResourceClaim team-a/c (pod p)".
// It is empty where none is known (a device prepared or running a process
// with no allocation seen) or the claims cannot be read.
func (r *Repartitioner) holdersNote(ctx context.Context, busy sets.Set[string]) string {
	h, ok := r.Allocations.(AllocationHolders)
	if !ok || busy.Len() == 0 {
		return ""
	}
	holders, err := h.Holders(ctx, busy)
	if err != nil || len(holders) == 0 {
		return ""
	}
	var parts []string
	for _, dev := range slices.Sorted(maps.Keys(holders)) {
		if len(parts) == maxHolderNotes {
			parts = append(parts, fmt.Sprintf("%d more", len(holders)-maxHolderNotes))
			break
		}
		parts = append(parts, fmt.Sprintf("%s is held by %s", dev, strings.Join(holders[dev], " and ")))
	}
	return "; " + strings.Join(parts, "; ")
}
