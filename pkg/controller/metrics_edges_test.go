package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestPendingPodsWithoutPodObject: a pending entry without its pod object
// counts as pending but has no creation time: the oldest is among the
// pods that have one, or 0 when none has.
func TestPendingPodsWithoutPodObject(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	created := planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}}}
	tests := map[string]struct {
		pending          []planner.Pod
		count, oldestSec float64
	}{
		"beside a pod": {pending: []planner.Pod{{}, created}, count: 2, oldestSec: float64(now.Add(-time.Minute).Unix())},
		"on their own": {pending: []planner.Pod{{}}, count: 1, oldestSec: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			recordPending(&planner.Snapshot{Now: now, Pending: tc.pending})
			if got := testutil.ToFloat64(pendingDemand); got != tc.count {
				t.Errorf("miglayout_pending_pods = %v, want %v", got, tc.count)
			}
			if got := testutil.ToFloat64(oldestPending); got != tc.oldestSec {
				t.Errorf("miglayout_pending_pods_oldest_creation_timestamp_seconds = %v, want %v", got, tc.oldestSec)
			}
		})
	}
}

// TestGPUProblemsAgentReasonNotValid: a GPU the agent reports Blocked or
// Failed with a reason that is no valid condition reason is counted under
// the reason the conditions give it (DeviceInUse, NVMLError), not under
// the agent's text.
func TestGPUProblemsAgentReasonNotValid(t *testing.T) {
	const name = "agent-reason-test"
	t.Cleanup(func() { forgetMetrics(name) })
	st := NodeState{Row: v1alpha1.NodeRow{Node: "a", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
		Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseBlocked, Reason: "device busy"}, {GPU: 1, Phase: v1alpha1.PhaseFailed}}}
	recordMetrics(name, Observation{Nodes: []NodeState{st}})
	for reason, want := range map[string]float64{v1alpha1.ReasonDeviceInUse: 1, v1alpha1.ReasonNVMLError: 1} {
		if got := testutil.ToFloat64(gpuProblemsMetric.WithLabelValues(name, reason)); got != want {
			t.Errorf("gpu_problems{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestForgetMetricsDropsGPUProblems: a deleted MigLayout's gpu_problems
// series go, and nothing of its reasons is kept.
func TestForgetMetricsDropsGPUProblems(t *testing.T) {
	const name = "forget-problems-test"
	t.Cleanup(func() { forgetMetrics(name) })
	recordMetrics(name, Observation{Nodes: []NodeState{blockedNode("a"), invalidNode("b")}})
	forgetMetrics(name)
	if n := gpuProblemsMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name}); n != 0 {
		t.Errorf("%d gpu_problems series left after forgetMetrics", n)
	}
	gpuProblems.mu.Lock()
	_, kept := gpuProblems.by[name]
	gpuProblems.mu.Unlock()
	if kept {
		t.Error("the reasons of a forgotten MigLayout are kept")
	}
}

// TestSpecProblemsSeries: a MigLayout Degraded by its spec has a
// spec_problems series per reason, counting the problems; a reason gone
// from a later observation loses its series, and a deleted MigLayout
// loses them all.
func TestSpecProblemsSeries(t *testing.T) {
	const name = "spec-problems-test"
	t.Cleanup(func() { forgetMetrics(name) })
	series := func() map[string]float64 {
		t.Helper()
		got := map[string]float64{}
		for _, reason := range []string{v1alpha1.ReasonInvalidSelector, v1alpha1.ReasonNoNodes, v1alpha1.ReasonRuleMatchesNoGPU, v1alpha1.ReasonProfileNotOffered, v1alpha1.ReasonSparesNotHoldable} {
			// Deleting reports whether the series existed; it is put back
			// from the counts kept.
			if specProblemsMetric.DeleteLabelValues(name, reason) {
				got[reason] = specProblems.by[name][reason]
				specProblemsMetric.WithLabelValues(name, reason).Set(got[reason])
			}
		}
		return got
	}
	steps := []struct {
		obs  Observation
		want map[string]float64
	}{
		{
			obs: Observation{SpecProblems: []SpecProblem{noNodesProblem,
				{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: "rule a"}, {Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: "rule b"}}},
			want: map[string]float64{v1alpha1.ReasonNoNodes: 1, v1alpha1.ReasonRuleMatchesNoGPU: 2},
		},
		{
			obs:  Observation{SelectorErr: errors.New("bad selector")},
			want: map[string]float64{v1alpha1.ReasonInvalidSelector: 1},
		},
		{
			obs:  Observation{Nodes: []NodeState{blockedNode("a")}},
			want: map[string]float64{},
		},
	}
	for i, step := range steps {
		recordMetrics(name, step.obs)
		if diff := cmp.Diff(step.want, series()); diff != "" {
			t.Errorf("step %d: spec_problems series (-want +got):\n%s", i, diff)
		}
		for reason, want := range step.want {
			if got := testutil.ToFloat64(specProblemsMetric.WithLabelValues(name, reason)); got != want {
				t.Errorf("step %d: spec_problems{reason=%q} = %v, want %v", i, reason, got, want)
			}
		}
	}
	recordMetrics(name, steps[0].obs)
	forgetMetrics(name)
	if n := specProblemsMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name}); n != 0 {
		t.Errorf("%d spec_problems series left after forgetMetrics", n)
	}
}
