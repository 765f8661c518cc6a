package main

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// cacheSyncWait bounds how long one /readyz request waits for the informer
// cache. Kubelet's probe times out after a second by default; the check
// answers before that.
const cacheSyncWait = 500 * time.Millisecond

// errCacheNotSynced is what /readyz reports until the cache has synced.
var errCacheNotSynced = errors.New("informer cache not synced yet")

// cacheSyncer is the part of controller-runtime's cache the readiness check
// needs (cache.Cache implements it).
type cacheSyncer interface {
	WaitForCacheSync(ctx context.Context) bool
}

// cacheSynced returns the controller's readiness check: ready once every
// informer the manager has started (the reconcilers' on the leader, the
// agent Leases' on every replica) has listed its objects. The leader is not
// Ready while it is still listing a large cluster's Pods, ResourceClaims and
// ResourceSlices. A standby lists only the agents' Leases, and so is Ready
// at once: it starts the reconcilers' informers when elected, and a
// failover waits for their lists (controller-runtime's cache sync timeout,
// 2 minutes, bounds it; a leader that misses it exits and the next replica
// is elected).
func cacheSynced(c cacheSyncer) func(*http.Request) error {
	return func(req *http.Request) error {
		ctx := context.Background()
		if req != nil {
			ctx = req.Context()
		}
		ctx, cancel := context.WithTimeout(ctx, cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errCacheNotSynced
		}
		return nil
	}
}
