package agent

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// CacheOptions are the agent manager's cache options for the node nodeName
// whose pool driver publishes: only the node's own NodeMigLayout and Node,
// only the node's ResourceSlices of driver (wipedToNode), no managed fields
// on any object, and ResourceClaims reduced by
// ClaimTransform. The agent reads claims cluster-wide (an allocation names
// its pool, which no field selector can select on); reduced, a claim
// allocated elsewhere costs its identity only, and a cached read lists the
// node's claims alone through AllocatedPoolIndex (ClaimAllocations.Indexed).
func CacheOptions(nodeName, driver string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.NodeMigLayout{}:    {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&corev1.Node{}:               {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&resourceapi.ResourceClaim{}: {Transform: ClaimTransform(driver, nodeName)},
			&resourceapi.ResourceSlice{}: {Field: fields.SelectorFromSet(fields.Set{
				resourceapi.ResourceSliceSelectorNodeName: nodeName, resourceapi.ResourceSliceSelectorDriver: driver})},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// ClaimTransform returns the cache transform of ResourceClaims for the pool
// of driver: a claim whose allocation names a device of the pool is kept
// whole but its managed fields; any other (not allocated, or allocated on
// another node) keeps only its identity (namespace, name, UID, resource
// version, deletion timestamp), with an empty spec and status. The agent
// reads a claim only for its allocation of this pool (AllocatedIn, the
// Binder), which a reduced claim lacks just as the whole one did; a claim
// allocated here later arrives whole with its update. Objects other than
// ResourceClaims (a tombstone of a deletion) pass unchanged.
// BenchmarkClaimCache measures what a claim allocated elsewhere keeps.
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
		return &resourceapi.ResourceClaim{TypeMeta: claim.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			ResourceVersion: claim.ResourceVersion, DeletionTimestamp: claim.DeletionTimestamp,
		}}, nil
	}
}
