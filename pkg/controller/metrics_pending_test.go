package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestPendingPodsOldest: the gauge is the oldest pending pod's creation
// time in Unix seconds (the alert takes time() minus it, so its age grows
// between plans), and 0 once none waits.
func TestPendingPodsOldest(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := func(age time.Duration) planner.Pod {
		return planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}}
	}
	recordPending(&planner.Snapshot{Now: now, Pending: []planner.Pod{pod(90 * time.Second), pod(40 * time.Minute), pod(time.Second)}})
	if got, want := testutil.ToFloat64(oldestPending), float64(now.Add(-40*time.Minute).Unix()); got != want {
		t.Errorf("miglayout_pending_pods_oldest_creation_timestamp_seconds = %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(pendingDemand); got != 3 {
		t.Errorf("miglayout_pending_pods = %v, want 3", got)
	}
	recordPending(&planner.Snapshot{Now: now})
	if got := testutil.ToFloat64(oldestPending); got != 0 {
		t.Errorf("miglayout_pending_pods_oldest_creation_timestamp_seconds = %v with no pod pending, want 0", got)
	}
}

// TestSchedulerSteadyWithoutAutoNodes: once Auto mode has no node, the
// Lease is not checked and nothing is held back: the gauge says 1 rather
// than keep the 0 of its last reading.
func TestSchedulerSteadyWithoutAutoNodes(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	h := newAutoCluster(t, ml)
	h.a.SchedulerLease = DefaultSchedulerLease
	schedulerSteadyMetric.Set(0)
	h.a.followSchedulerLease(context.Background())
	if got := testutil.ToFloat64(schedulerSteadyMetric); got != 1 {
		t.Errorf("miglayout_controller_scheduler_steady = %v with no Auto node, want 1", got)
	}
}
