package agent

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// CacheOptions are the agent manager's cache options for the node nodeName
// whose pool driver publishes: only the node's own NodeMigLayout, no
// managed fields on any object, and ResourceClaims reduced by
// ClaimTransform. The agent reads claims cluster-wide (an allocation names
// its pool, which no field selector can select on); reduced, a claim
// allocated elsewhere costs its metadata only.
func CacheOptions(nodeName, driver string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.NodeMigLayout{}:    {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&resourceapi.ResourceClaim{}: {Transform: ClaimTransform(driver, nodeName)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// ClaimTransform returns the cache transform of ResourceClaims for the pool
// of driver: a claim whose allocation names a device of the pool is kept
// whole; any other (not allocated, or allocated on another node) keeps its
// metadata but annotations, with an empty spec and status. Managed fields
// are dropped from both. The agent reads a claim only for its allocation
// of this pool (AllocatedIn, the Binder), which a reduced claim lacks just
// as the whole one did; a claim allocated here later arrives whole with
// its update. Objects other than ResourceClaims (a tombstone of a deletion)
// pass unchanged.
func ClaimTransform(driver, pool string) toolscache.TransformFunc {
	return func(in any) (any, error) {
		claim, ok := in.(*resourceapi.ResourceClaim)
		if !ok {
			return in, nil
		}
		claim.ManagedFields = nil
		if AllocatedIn([]resourceapi.ResourceClaim{*claim}, driver, pool).Len() > 0 {
			return claim, nil
		}
		claim.Annotations = nil
		claim.Spec = resourceapi.ResourceClaimSpec{}
		claim.Status = resourceapi.ResourceClaimStatus{}
		return claim, nil
	}
}
