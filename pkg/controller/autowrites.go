package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// autoWrites keys the planner's own NodeMigLayout writes in
// AutoPlanner.written: one plan covers every Auto MigLayout.
const autoWrites types.UID = "auto-planner"

// cacheCatchUpRecheck is how soon a pass held for the cache to show the
// planner's own writes looks again, where no event of the write wakes it
// first.
const cacheCatchUpRecheck = time.Second

// cacheShowsWrites returns how long the pass must wait for the cache
// (cached, the NodeMigLayouts read, by node) to show the specs the planner
// last wrote; 0 once it does. A plan on a cache behind its own writes
// would count a GPU whose change it just wrote as not changing: the limits
// on GPUs changing at once (maxGPUs, across nodes) would give its slot to
// another GPU, and the pods that change serves would be planned a second
// change. The optimistic lock of each write guards only the node written.
// Writes the cache does not show within rolloutExpectTTL are given up.
func (a *AutoPlanner) cacheShowsWrites(ctx context.Context, cached map[string]*v1alpha1.NodeMigLayout) (time.Duration, error) {
	var reader client.Reader = a.Client
	if a.APIReader != nil {
		reader = a.APIReader
	}
	if err := a.written.resolveLive(ctx, reader, autoWrites); err != nil {
		return 0, err
	}
	now := a.now()
	unseen, expires := a.written.unseen(autoWrites, cached, now)
	if len(unseen) == 0 {
		return 0, nil
	}
	klog.FromContext(ctx).V(1).Info("Waiting for the cache to show the planner's own writes", "nodes", sortedKeys(unseen))
	return max(min(expires.Sub(now), cacheCatchUpRecheck), time.Millisecond), nil
}
