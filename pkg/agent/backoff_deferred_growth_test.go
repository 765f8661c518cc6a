package agent

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// The GPU results of the retry tests: a change that failed in NVML, a
// layout applied, and a GPU waiting for a device in use.
var (
	nvmlFailedResult = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	readyResult      = GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	blockedResult    = GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse}
)

// TestDeferredFailureKeepsItsGrownBackoff: GPU 0 fails pass after pass; a
// pass before its retry is due, which leaves it deferred and finds GPU 1
// waiting, does not start the failing backoff again: when GPU 0 fails once
// more at its retry, its next retry comes after the grown delay, not about
// a second.
func TestDeferredFailureKeepsItsGrownBackoff(t *testing.T) {
	g := newBackoffRig()
	r := g.r
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	var d time.Duration
	for range 8 {
		d = r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: readyResult}}, nil)
		g.now = g.now.Add(d)
	}
	grown := d
	if grown < 5*time.Second {
		t.Fatalf("after 8 failures alike the retry comes after %s, want it grown past 5s", grown)
	}
	// A pass before GPU 0's retry is due (a ResourceClaim event): GPU 0
	// deferred, as it was; GPU 1 waits for a device in use.
	g.now = g.now.Add(-grown / 2)
	r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: blockedResult}}, map[int]GPUResult{0: nvmlFailedResult})
	g.now = g.now.Add(grown / 2)
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: readyResult}}, nil); d < 2*time.Second {
		t.Errorf("GPU 0 failing again at its retry, after a pass that deferred it: next retry after %s, want the grown failing backoff (at least 2s)", d)
	}
}

// TestPassComesNoLaterThanTheFirstGPUDue: a pass that leaves GPU 0
// deferred (its retry due in about a second) and GPU 1 waiting on the
// grown waiting backoff asks to come back when GPU 0's retry is due, not
// after the wait's longer delay.
func TestPassComesNoLaterThanTheFirstGPUDue(t *testing.T) {
	g := newBackoffRig()
	r := g.r
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	for range 10 {
		g.now = g.now.Add(r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: readyResult, 1: blockedResult}}, nil))
	}
	first := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: blockedResult}}, nil)
	if first > 1500*time.Millisecond {
		t.Fatalf("GPU 0 failing for the first time: retry after %s, want about a second (at most 1.5s)", first)
	}
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: blockedResult}}, map[int]GPUResult{0: nvmlFailedResult}); d > first {
		t.Errorf("a pass leaving GPU 0 deferred (due in %s) and GPU 1 waiting: retry after %s, want at most %s", first, d, first)
	}
}

// TestRetryDueAlreadyIsAskedSoon: a GPU deferred by a pass whose retry came
// due while the pass ran is retried at once (after a millisecond), never
// after a delay of zero or less, which controller-runtime takes for no
// retry at all.
func TestRetryDueAlreadyIsAskedSoon(t *testing.T) {
	g := newBackoffRig()
	r := g.r
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	first := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult}}, nil)
	g.now = g.now.Add(first + time.Second)
	if d := r.retryAfter(specs, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult}}, map[int]GPUResult{0: nvmlFailedResult}); d <= 0 || d > time.Second {
		t.Errorf("GPU 0 deferred, its retry due a second ago: retry after %s, want a positive delay of at most a second", d)
	}
}

// TestRetryDueForgottenWithItsSpec: a GPU whose change failed and that the
// spec then leaves out has no retry due any more: put back in the spec,
// asking for the same layout before the old retry would have come due, it
// is tried at once, not deferred.
func TestRetryDueForgottenWithItsSpec(t *testing.T) {
	g := newBackoffRig()
	r := g.r
	both := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0")}
	nml := &v1alpha1.NodeMigLayout{Spec: v1alpha1.NodeMigLayoutSpec{GPUs: both}}
	r.deferredGPUs(nml)
	r.retryAfter(both, &SyncResult{Retry: true, Results: map[int]GPUResult{0: nvmlFailedResult, 1: blockedResult}}, nil)
	if got := r.deferredGPUs(nml); len(got) != 1 {
		t.Fatalf("deferred GPUs right after GPU 0 failed: %v, want GPU 0", got)
	}
	r.retryAfter([]v1alpha1.GPUSpec{spec(1, "3g.40gb@0")}, &SyncResult{Retry: true, Results: map[int]GPUResult{1: blockedResult}}, nil)
	if got := r.deferredGPUs(nml); len(got) != 0 {
		t.Errorf("GPU 0 back in the spec after a pass without it: deferred GPUs %v, want none", got)
	}
}
