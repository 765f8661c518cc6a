package agent

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestBackoffGrowsOnlyWhileTheOutcomeRepeats: passes that end with the same
// GPU Blocked back off longer and longer; a pass that ends otherwise (a GPU
// failing anew beside it) starts again from about a second, so the new
// failure is not retried after the long wait's delay; outcomes that
// alternate still back off.
func TestBackoffGrowsOnlyWhileTheOutcomeRepeats(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Now: func() time.Time { return now }}
	blocked := &SyncResult{Retry: true, Results: map[int]GPUResult{
		0: {Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse},
		1: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied},
	}}
	var d time.Duration
	for range 12 {
		d = r.nextBackoff(outcome(blocked))
		now = now.Add(d)
	}
	if d < 20*time.Second {
		t.Fatalf("after 12 passes blocked alike the delay is %s, want it grown past 20 s", d)
	}
	failing := &SyncResult{Retry: true, Results: map[int]GPUResult{
		0: {Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse},
		1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError},
	}}
	if d := r.nextBackoff(outcome(failing)); d > 2*time.Second {
		t.Errorf("a pass whose GPU 1 failed anew retries after %s, want about a second", d)
	}
	if d := r.nextBackoff(outcome(failing)); d > 3*time.Second {
		t.Errorf("the second pass alike retries after %s, want the backoff's second step", d)
	}
	// Outcomes that alternate pass after pass, for half an hour: a few
	// resets (one per outcomeResetEvery) at most, so about as few passes
	// as a steady outcome's (26 in half an hour), not hundreds.
	passes := 0
	for end := now.Add(30 * time.Minute); now.Before(end); passes++ {
		o := blocked
		if passes%2 == 1 {
			o = failing
		}
		now = now.Add(r.nextBackoff(outcome(o)))
	}
	if passes > 80 {
		t.Errorf("%d passes in half an hour of alternating outcomes, want at most 80", passes)
	}
}
