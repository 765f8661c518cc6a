package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultSchedulerLease is the leader-election Lease kube-scheduler renews
// by default (--leader-elect-resource-namespace and -name).
var DefaultSchedulerLease = types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}

// defaultSchedulerLeaseDuration is kube-scheduler's
// --leader-elect-lease-duration, for a Lease that does not say its own.
const defaultSchedulerLeaseDuration = 15 * time.Second

// schedulerHoldRecheck is how often, at most, kube-scheduler's Lease is
// read while Auto mode has nodes (schedulerLeaseFollower; a third of the
// lease duration where that is shorter, so that two readings tell a Lease
// being renewed), and how soon a pass holding declines back looks again.
// It also bounds one reading.
const schedulerHoldRecheck = 5 * time.Second

// schedulerMinRecheck bounds how often the Lease is read for a short lease
// duration.
const schedulerMinRecheck = time.Second

// schedulerUnreadableRecheck is how often a Lease that does not exist or
// may not be read (not checked) is looked for again.
const schedulerUnreadableRecheck = time.Minute

// schedulerWatch follows kube-scheduler's leader-election Lease on the
// controller's own clock, as client-go's leader election does: the Lease's
// times are written with the scheduler's clock, which may be off from the
// controller's by more than a lease duration. The Lease is read every
// readEvery while Auto mode has nodes (schedulerLeaseFollower), and when a
// wait falls due (declineTracker) on a verdict older than that.
type schedulerWatch struct {
	// judgedAt is when the last verdict, steady and why, was reached
	// (from a reading, or a failure to read); unreadable: the Lease does
	// not exist or may not be read.
	judgedAt   time.Time
	steady     bool
	why        string
	unreadable bool
	// readAt is the last reading of the Lease, duration the lease
	// duration it gave.
	readAt   time.Time
	duration time.Duration
	// rv is the Lease's resourceVersion at the last reading, rvSince
	// when it was first read.
	rv      string
	rvSince time.Time
	// renewedAt is the last reading that found the Lease changed since a
	// reading at most a lease duration before: the scheduler renewing it.
	renewedAt time.Time
	// holder is the scheduler holding the Lease, holderSince when it was
	// first read holding it; "" after the Lease was found not renewed for
	// a lease duration, so that a scheduler that resumes counts anew.
	holder      string
	holderSince time.Time
}

// observe records a reading of the Lease at now and judges it: steady when
// a scheduler holds it, has been seen renewing it within its duration, and
// has been seen holding it for at least unboundAfter. A pod's free devices
// waiting unbound say something about the pod only if kube-scheduler was
// there to bind it: while it is down, hung or just (re)started, every pod
// would look declined and be planned elsewhere at once. The first reading
// is never steady: it takes a second one to see the Lease renewed, and
// unboundAfter to see its holder stay; so is a reading more than a lease
// duration after the one before, which starts over.
func (w *schedulerWatch) observe(l *coordinationv1.Lease, now time.Time, unboundAfter time.Duration) (bool, string) {
	duration := defaultSchedulerLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	w.duration = duration
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	stalled := false
	switch {
	case !w.readAt.IsZero() && now.Sub(w.readAt) > duration:
		// Readings this far apart tell nothing of what happened in
		// between (the scheduler may have hung and resumed under the
		// same identity): start over from this one.
		w.renewedAt, w.holder = time.Time{}, ""
		w.rv, w.rvSince = l.ResourceVersion, now
	case l.ResourceVersion != w.rv:
		if !w.readAt.IsZero() {
			w.renewedAt = now
		}
		w.rv, w.rvSince = l.ResourceVersion, now
	case now.Sub(w.rvSince) > duration:
		// Not renewed for a lease duration: a scheduler that takes it
		// up again (the same process after a hang, or a new one) has
		// to be seen holding it for unboundAfter from then.
		stalled = true
		w.holder = ""
	}
	if holder != w.holder && !stalled {
		w.holder, w.holderSince = holder, now
	}
	w.readAt = now
	switch {
	case holder == "":
		return false, "no kube-scheduler holds its Lease"
	case w.renewedAt.IsZero() || now.Sub(w.renewedAt) > duration:
		return false, fmt.Sprintf("kube-scheduler %s has not been seen renewing its Lease within %s", holder, duration)
	case now.Sub(w.holderSince) < unboundAfter:
		return false, fmt.Sprintf("kube-scheduler %s has been seen holding its Lease for %s, less than %s", holder, now.Sub(w.holderSince).Round(time.Second), unboundAfter)
	}
	return true, ""
}

// schedulerSteady says whether declines may be made now: kube-scheduler's
// Lease (SchedulerLease) judged by schedulerWatch.observe, read again
// when the last verdict is readEvery old (the follower,
// schedulerLeaseFollower, keeps it fresher while Auto mode has nodes).
// With no Lease to read (kube-scheduler runs without leader election, or
// the controller may not read it: NotFound, Forbidden) or none
// configured, they may; another error holds them back.
func (a *AutoPlanner) schedulerSteady(ctx context.Context) (bool, string) {
	if a.SchedulerLease.Name == "" {
		return true, ""
	}
	now := a.now()
	a.mu.Lock()
	fresh, steady, why := a.scheduler.fresh(now)
	a.mu.Unlock()
	if fresh {
		return steady, why
	}
	return a.readSchedulerLease(ctx)
}

// readEvery is how often the Lease is read: a third of its lease duration
// (the last reading's, kube-scheduler's default before one), between
// schedulerMinRecheck and schedulerHoldRecheck; schedulerUnreadableRecheck
// for a Lease not checked.
func (w *schedulerWatch) readEvery() time.Duration {
	if w.unreadable {
		return schedulerUnreadableRecheck
	}
	d := w.duration
	if d <= 0 {
		d = defaultSchedulerLeaseDuration
	}
	return min(max(d/3, schedulerMinRecheck), schedulerHoldRecheck)
}

// fresh returns the last verdict if it is recent enough to use at now:
// readEvery old at most.
func (w *schedulerWatch) fresh(now time.Time) (bool, bool, string) {
	maxAge := w.readEvery()
	if w.judgedAt.IsZero() || now.Before(w.judgedAt) || now.Sub(w.judgedAt) >= maxAge {
		return false, false, ""
	}
	return true, w.steady, w.why
}

// readSchedulerLease reads kube-scheduler's Lease and judges it
// (schedulerSteady). One reading at a time (leaseReads): the follower and
// a pass may read at once, and observe takes readings in the order the
// API server served them.
func (a *AutoPlanner) readSchedulerLease(ctx context.Context) (bool, string) {
	a.leaseReads.Lock()
	defer a.leaseReads.Unlock()
	reader := a.APIReader
	if reader == nil {
		reader = a.Client
	}
	var l coordinationv1.Lease
	getCtx, cancel := context.WithTimeout(ctx, schedulerHoldRecheck)
	err := reader.Get(getCtx, a.SchedulerLease, &l)
	cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	w := &a.scheduler
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		if !w.unreadable {
			klog.FromContext(ctx).Info("kube-scheduler's Lease cannot be read: declines are not held back while kube-scheduler is down", "lease", a.SchedulerLease, "err", err)
		}
		*w = schedulerWatch{judgedAt: now, steady: true, unreadable: true}
	case err != nil:
		w.judgedAt, w.steady, w.why = now, false, fmt.Sprintf("reading kube-scheduler's Lease %s: %v", a.SchedulerLease, err)
	default:
		w.unreadable = false
		w.steady, w.why = w.observe(&l, now, a.unboundAfter())
		w.judgedAt = now
	}
	if w.steady {
		schedulerSteadyMetric.Set(1)
	} else {
		schedulerSteadyMetric.Set(0)
	}
	return w.steady, w.why
}

// followSchedulerLease reads kube-scheduler's Lease if Auto mode has nodes
// (the last plan's) and declines are on, and the last verdict is readEvery
// old (a Lease not checked, because it does not exist or may not be read,
// every schedulerUnreadableRecheck). Read only when a wait falls due, the
// Lease would first be seen then, and the first decline after the
// controller starts would wait UnboundAfter more to see the scheduler
// hold it.
func (a *AutoPlanner) followSchedulerLease(ctx context.Context) {
	if a.SchedulerLease.Name == "" || a.unboundAfter() <= 0 {
		return
	}
	a.mu.Lock()
	auto := len(a.autoNodes) > 0
	fresh, _, _ := a.scheduler.fresh(a.now())
	a.mu.Unlock()
	switch {
	case !auto:
		// Not checked while Auto mode has no node: nothing is held
		// back (the gauge would otherwise keep its last reading).
		schedulerSteadyMetric.Set(1)
	case !fresh:
		a.readSchedulerLease(ctx)
	}
}

// schedulerLeaseFollower calls followSchedulerLease every interval while
// the controller leads: every schedulerMinRecheck in the manager, so that
// readings follow readEvery.
func (a *AutoPlanner) schedulerLeaseFollower(every time.Duration) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("autoplanner"))
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				a.followSchedulerLease(ctx)
			}
		}
	})
}
