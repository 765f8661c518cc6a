package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// syncingCache is a cache whose informers sync when synced is set; until
// then WaitForCacheSync blocks until its context ends, as the informer
// cache's does.
type syncingCache struct{ synced atomic.Bool }

func (c *syncingCache) WaitForCacheSync(ctx context.Context) bool {
	if c.synced.Load() {
		return true
	}
	<-ctx.Done()
	return false
}

func TestReadyzWaitsForCacheSync(t *testing.T) {
	c := &syncingCache{}
	check := cacheSynced(c)
	if err := check(httptest.NewRequest("GET", "/readyz", nil)); !errors.Is(err, errCacheNotSynced) {
		t.Fatalf("before the cache synced: got %v, want %v", err, errCacheNotSynced)
	}
	c.synced.Store(true)
	if err := check(httptest.NewRequest("GET", "/readyz", nil)); err != nil {
		t.Fatalf("after the cache synced: %v", err)
	}
}
