package controller

import (
	"context"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readDeclines reads back, on the first pass, the nodes this controller
// left out of pending pods' plans before it started (an earlier run, or
// the replica that led before), from its EventSchedulerDeclinedNode events
// (declineTracker.restore): without them a restart would plan those pods
// on those nodes again, and wait --auto-unbound-after again, for each.
// Events expire (an hour by default) and may have been dropped; a failure
// to list them is logged and the controller goes on without them (it
// does not try again: the events are its memory of the time before it
// started, which a later list adds nothing to).
func (a *AutoPlanner) readDeclines(ctx context.Context, now time.Time) {
	a.mu.Lock()
	done := a.declinesRead
	a.declinesRead = true
	a.mu.Unlock()
	if done || a.unboundAfter() <= 0 {
		return
	}
	reader := a.APIReader
	if reader == nil {
		reader = a.Client
	}
	logger := klog.FromContext(ctx)
	var events eventsv1.EventList
	if err := reader.List(ctx, &events, client.MatchingFields{"reason": EventSchedulerDeclinedNode}); err != nil {
		logger.Info("Cannot read back the nodes left out of pods' plans before this controller started; going on without them", "err", err)
		return
	}
	a.mu.Lock()
	active := a.declines.restore(declinedEvents(events.Items), now, a.declinedFor())
	a.mu.Unlock()
	if active > 0 {
		logger.Info("Read back the nodes left out of pods' plans before this controller started", "declined", active)
	}
}
