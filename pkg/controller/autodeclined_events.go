package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// declineEventsPage is how many events one list request of
// ListDeclinedEvents asks for.
const declineEventsPage = 500

// declineEventsTimeout bounds ListDeclinedEvents: the API server filters
// events by reason without an index, reading them all. The read back runs
// on a planning pass, which waits for it: at most declineReadTries of them
// wait, each at most this long.
const declineEventsTimeout = 15 * time.Second

// declineReadTries is how many passes try to read the declines back before
// the controller goes on without them.
const declineReadTries = 3

// ListDeclinedEvents lists the EventSchedulerDeclinedNode events of every
// namespace (events.k8s.io/v1, field selector reason=SchedulerDeclinedNode),
// a page of declineEventsPage at a time, within declineEventsTimeout. The
// API server reads every Event to filter them (no index on reason), so the
// controller lists them once, as it starts; kubectl miglayout plan once
// per run.
func ListDeclinedEvents(ctx context.Context, reader client.Reader) ([]eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, declineEventsTimeout)
	defer cancel()
	var out []eventsv1.Event
	opts := []client.ListOption{client.MatchingFields{"reason": EventSchedulerDeclinedNode}, client.Limit(declineEventsPage)}
	for {
		var page eventsv1.EventList
		if err := reader.List(ctx, &page, opts...); err != nil {
			return nil, fmt.Errorf("listing %s events: %w", EventSchedulerDeclinedNode, err)
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{client.MatchingFields{"reason": EventSchedulerDeclinedNode}, client.Limit(declineEventsPage), client.Continue(page.Continue)}
	}
}

// readDeclines reads back, on the first pass that can, the nodes this
// controller left out of pending pods' plans before it started (an
// earlier run, or the replica that led before), from its
// EventSchedulerDeclinedNode events (declineTracker.restore): without
// them a restart would plan those pods on those nodes again, and wait
// --auto-unbound-after again, for each. Events expire (the API server's
// --event-ttl, an hour by default), so a decline that outlives its event
// (the longest ones, 8 times --auto-declined-for) is read back only while
// the event lives. A failed list is tried again on the next pass, up to
// declineReadTries passes; one the controller may not make (Forbidden: an
// older chart's RBAC) is not; either way it then goes on without them.
// Without APIReader (tests) nothing is read.
// pods are the pods read this pass: only unbound ones count in the log.
func (a *AutoPlanner) readDeclines(ctx context.Context, pods []corev1.Pod, now time.Time) {
	a.mu.Lock()
	done := a.declinesRead
	a.mu.Unlock()
	if done || a.APIReader == nil || a.unboundAfter() <= 0 {
		return
	}
	logger := klog.FromContext(ctx)
	events, err := ListDeclinedEvents(ctx, a.APIReader)
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			a.mu.Lock()
			a.declinesRead = true
			a.mu.Unlock()
			logger.Info("Cannot read back the nodes left out of pods' plans before this controller started; going on without them", "err", err)
			return
		}
		a.mu.Lock()
		a.declineReadFailures++
		giveUp := a.declineReadFailures >= declineReadTries
		a.declinesRead = giveUp
		a.mu.Unlock()
		if giveUp {
			logger.Error(err, "Reading back the nodes left out of pods' plans before this controller started; going on without them", "tries", declineReadTries)
			return
		}
		logger.Error(err, "Reading back the nodes left out of pods' plans before this controller started; trying again on the next pass")
		return
	}
	unbound := sets.New[types.UID]()
	for i := range pods {
		if p := &pods[i]; p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			unbound.Insert(p.UID)
		}
	}
	a.mu.Lock()
	a.declinesRead = true
	restored := a.declines.restore(declinedEvents(events, now), a.declinedFor())
	a.mu.Unlock()
	active := 0
	for _, d := range restored {
		if unbound.Has(d.uid) && now.Before(d.until) {
			active++
		}
	}
	if active > 0 {
		logger.Info("Read back the nodes left out of pods' plans before this controller started", "declined", active, "events", len(events))
	}
}
