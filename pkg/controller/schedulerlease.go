package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// DefaultSchedulerLease is the leader-election Lease kube-scheduler renews
// by default (--leader-elect-resource-namespace and -name).
var DefaultSchedulerLease = types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}

// defaultSchedulerLeaseDuration is kube-scheduler's
// --leader-elect-lease-duration, for a Lease that does not say its own.
const defaultSchedulerLeaseDuration = 15 * time.Second

// schedulerHoldRecheck is how often the planner looks at kube-scheduler's
// Lease again while it holds declines back.
const schedulerHoldRecheck = 10 * time.Second

// schedulerSteady reports whether kube-scheduler's leader-election Lease
// shows a scheduler that has been running, renewing it, for at least
// unboundAfter before now, and why not. A pod's free devices waiting
// unbound say something about the pod only if kube-scheduler was there to
// bind it: while it is down, or just restarted (a new holder, or one that
// took the Lease back), every pod would look declined and be planned
// elsewhere at once.
func schedulerSteady(l *coordinationv1.Lease, now time.Time, unboundAfter time.Duration) (bool, string) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return false, "no kube-scheduler holds its Lease"
	}
	duration := defaultSchedulerLeaseDuration
	if s.LeaseDurationSeconds != nil {
		duration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	if s.RenewTime == nil || now.After(s.RenewTime.Add(duration)) {
		return false, fmt.Sprintf("kube-scheduler has not renewed its Lease for %s", duration)
	}
	if s.AcquireTime != nil && now.Sub(s.AcquireTime.Time) < unboundAfter {
		return false, fmt.Sprintf("kube-scheduler %s took its Lease %s ago, less than %s", *s.HolderIdentity, now.Sub(s.AcquireTime.Time).Round(time.Second), unboundAfter)
	}
	return true, ""
}

// schedulerSteady reads kube-scheduler's Lease (SchedulerLease) and says
// whether declines may be made now (schedulerSteady). With no Lease to
// read (kube-scheduler runs without leader election, or the Lease is not
// readable: NotFound, Forbidden) or none configured, they may.
func (a *AutoPlanner) schedulerSteady(ctx context.Context) (bool, string) {
	if a.SchedulerLease.Name == "" {
		return true, ""
	}
	// Passes come with every event: the Lease is read at most every
	// schedulerVerdictTTL.
	a.mu.Lock()
	v := a.schedulerVerdict
	a.mu.Unlock()
	if !v.at.IsZero() && a.now().Sub(v.at) < schedulerVerdictTTL && !a.now().Before(v.at) {
		return v.steady, v.why
	}
	steady, why := a.readSchedulerLease(ctx)
	a.mu.Lock()
	a.schedulerVerdict = schedulerVerdict{at: a.now(), steady: steady, why: why}
	a.mu.Unlock()
	return steady, why
}

// schedulerVerdictTTL is how long a reading of kube-scheduler's Lease
// stands.
const schedulerVerdictTTL = 5 * time.Second

// schedulerVerdict is the last reading of kube-scheduler's Lease.
type schedulerVerdict struct {
	at     time.Time
	steady bool
	why    string
}

// readSchedulerLease reads kube-scheduler's Lease and judges it.
func (a *AutoPlanner) readSchedulerLease(ctx context.Context) (bool, string) {
	reader := a.APIReader
	if reader == nil {
		reader = a.Client
	}
	var l coordinationv1.Lease
	switch err := reader.Get(ctx, a.SchedulerLease, &l); {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		klog.FromContext(ctx).V(2).Info("kube-scheduler's Lease cannot be read: declines are not held back while it is down", "lease", a.SchedulerLease, "err", err)
		return true, ""
	case err != nil:
		return false, fmt.Sprintf("reading kube-scheduler's Lease %s: %v", a.SchedulerLease, err)
	}
	return schedulerSteady(&l, a.now(), a.unboundAfter())
}
