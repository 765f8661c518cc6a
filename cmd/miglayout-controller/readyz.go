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
// agent Leases' on every replica) has listed its objects. A replica is not
// Ready, and a rolling update does not take the next old replica down, while
// it is still listing a large cluster's Pods, ResourceClaims and
// ResourceSlices.
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
