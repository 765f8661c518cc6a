package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// recordingCache is a synced cache that keeps the context each
// WaitForCacheSync call was given.
type recordingCache struct{ ctx context.Context }

func (c *recordingCache) WaitForCacheSync(ctx context.Context) bool {
	c.ctx = ctx
	return true
}

type probeKey struct{}

// TestReadyzWaitsWithinTheProbeTimeout: the wait for the cache ends with
// the probe's request (its context is the request's) and before kubelet's
// default probe timeout of a second; a check without a request waits too.
func TestReadyzWaitsWithinTheProbeTimeout(t *testing.T) {
	c := &recordingCache{}
	check := cacheSynced(c)
	req := httptest.NewRequest("GET", "/readyz", nil)
	req = req.WithContext(context.WithValue(req.Context(), probeKey{}, "probe"))
	start := time.Now()
	if err := check(req); err != nil {
		t.Fatalf("synced cache: %v", err)
	}
	// The wait's deadline was set during the check: it ends before a
	// probe started with the check times out, so /readyz answers why.
	if c.ctx.Value(probeKey{}) != "probe" {
		t.Error("the wait does not end with the probe's request")
	}
	deadline, ok := c.ctx.Deadline()
	if !ok || deadline.Sub(start) >= time.Second {
		t.Errorf("the wait ends %v after the check started (deadline set: %t), want within kubelet's 1s probe timeout", deadline.Sub(start), ok)
	}
	if err := check(nil); err != nil {
		t.Errorf("synced cache, no request: %v", err)
	}
}
