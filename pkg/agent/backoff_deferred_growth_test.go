package agent

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeferredFailureKeepsItsGrownBackoff: GPU 0 fails pass after pass; a
// pass before its retry is due, which leaves it deferred and finds GPU 1
// waiting, does not start the failing backoff again: when GPU 0 fails once
// more at its retry, its next retry comes after the grown delay, not about
// a second.
func TestDeferredFailureKeepsItsGrownBackoff(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Now: func() time.Time { return now }}
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	nvmlErr := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	ready := GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	blocked := GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse}
	var d time.Duration
	for range 8 {
		d = r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: ready}}, nil)
		now = now.Add(d)
	}
	grown := d
	if grown < 5*time.Second {
		t.Fatalf("after 8 failures alike the retry comes after %s, want it grown past 5s", grown)
	}
	// A pass before GPU 0's retry is due (a ResourceClaim event): GPU 0
	// deferred, as it was; GPU 1 waits for a device in use.
	now = now.Add(-grown / 2)
	r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: blocked}}, map[int]GPUResult{0: nvmlErr})
	now = now.Add(grown / 2)
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: ready}}, nil); d < 2*time.Second {
		t.Errorf("GPU 0 failing again at its retry, after a pass that deferred it: next retry after %s, want the grown failing backoff (at least 2s)", d)
	}
}

// TestPassComesNoLaterThanTheFirstGPUDue: a pass that leaves GPU 0
// deferred (its retry due in about a second) and GPU 1 waiting on the
// grown waiting backoff asks to come back when GPU 0's retry is due, not
// after the wait's longer delay.
func TestPassComesNoLaterThanTheFirstGPUDue(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Now: func() time.Time { return now }}
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	nvmlErr := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	ready := GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	blocked := GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse}
	for range 10 {
		now = now.Add(r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: ready, 1: blocked}}, nil))
	}
	first := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: blocked}}, nil)
	if first > 1500*time.Millisecond {
		t.Fatalf("GPU 0 failing for the first time: retry after %s, want about a second (at most 1.5s)", first)
	}
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: blocked}}, map[int]GPUResult{0: nvmlErr}); d > first {
		t.Errorf("a pass leaving GPU 0 deferred (due in %s) and GPU 1 waiting: retry after %s, want at most %s", first, d, first)
	}
}

// TestRetryDueAlreadyIsAskedSoon: a GPU deferred by a pass whose retry came
// due while the pass ran is retried at once (after a millisecond), never
// after a delay of zero or less, which controller-runtime takes for no
// retry at all.
func TestRetryDueAlreadyIsAskedSoon(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Now: func() time.Time { return now }}
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	nvmlErr := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	first := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr}}, nil)
	now = now.Add(first + time.Second)
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr}}, map[int]GPUResult{0: nvmlErr}); d <= 0 || d > time.Second {
		t.Errorf("GPU 0 deferred, its retry due a second ago: retry after %s, want a positive delay of at most a second", d)
	}
}

// TestRetryDueForgottenWithItsSpec: a GPU whose change failed and that the
// spec then leaves out has no retry due any more: put back in the spec,
// asking for the same layout before the old retry would have come due, it
// is tried at once, not deferred.
func TestRetryDueForgottenWithItsSpec(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Now: func() time.Time { return now }}
	nvmlErr := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	blocked := GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse}
	both := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	nml := &v1alpha1.NodeMigLayout{Spec: v1alpha1.NodeMigLayoutSpec{GPUs: both}}
	r.deferredGPUs(nml)
	r.retryAfter(both, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlErr, 1: blocked}}, nil)
	if got := r.deferredGPUs(nml); len(got) != 1 {
		t.Fatalf("deferred GPUs right after GPU 0 failed: %v, want GPU 0", got)
	}
	r.retryAfter([]v1alpha1.GPUSpec{spec(1, "3g.40gb@0")}, &SyncResult{Retry: true, Results: map[int]GPUResult{1: blocked}}, nil)
	if got := r.deferredGPUs(nml); len(got) != 0 {
		t.Errorf("GPU 0 back in the spec after a pass without it: deferred GPUs %v, want none", got)
	}
}
