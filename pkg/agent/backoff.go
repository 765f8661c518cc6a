package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// outcomeResetEvery is how often a new outcome may reset a backoff.
const outcomeResetEvery = 10 * time.Minute

// retryBackoff is the delay before retrying one kind of pass: exponential
// from 1 s to 2 min, times 1.5 each pass, each delay drawn within ±50 % of
// that (cenkalti/backoff's multiplier and randomization), while passes of
// its kind end alike; from 1 s again once the outcome differs, at most every
// outcomeResetEvery (outcomes that alternate still back off), or on reset.
// The zero value is ready to use.
type retryBackoff struct {
	b *backoff.ExponentialBackOff
	// last is the outcome of the pass that last backed off; lastReset
	// when a new outcome last reset the backoff.
	last      string
	lastReset time.Time
}

// next returns the delay before retrying a pass that ended with outcome.
func (rb *retryBackoff) next(outcome string, now time.Time) time.Duration {
	// After reset (last empty) the backoff starts from 1 s already: a first
	// outcome does not spend the reset outcomeResetEvery allows.
	if rb.b != nil && rb.last != "" && outcome != rb.last && now.Sub(rb.lastReset) >= outcomeResetEvery {
		rb.b.Reset()
		rb.lastReset = now
	}
	rb.last = outcome
	if rb.b == nil {
		rb.b = backoff.NewExponentialBackOff()
		rb.b.InitialInterval = time.Second
		rb.b.MaxInterval = 2 * time.Minute
		rb.b.MaxElapsedTime = 0
		rb.b.Reset()
	}
	return rb.b.NextBackOff()
}

// reset starts the backoff again from 1 s.
func (rb *retryBackoff) reset() {
	rb.last = ""
	if rb.b != nil {
		rb.b.Reset()
	}
}

// onInput reports whether g failed on the GPU's spec, which only a new
// spec changes: a layout invalid for it (InvalidLayout), a model the
// catalog lacks (UnknownGPU), or a GPU NVML does not count (GPUMissing).
func onInput(g GPUResult) bool {
	return g.Phase == v1alpha1.PhaseFailed &&
		(g.Reason == v1alpha1.ReasonInvalidLayout || g.Reason == v1alpha1.ReasonUnknownGPU || g.Reason == v1alpha1.ReasonGPUMissing)
}

// outcomes splits what a pass left to retry into its GPUs that failed
// (Failed on an error that may pass: NVMLError, GPUUnreadable,
// JournalUnwritable, DeviceTaintsUnsupported; Pending with PassFailed: a
// change stopped on an error that is not NVML's, such as an API server that
// could not be read; or Pending and in res.Stopped: the API server could
// not be written or read just before the NVML work) and those that wait
// (Blocked: a device in use, whose release wakes the agent, or a reset
// required; Pending: the spec changed during the pass), each as
// "index:phase:reason" in index order, comma-separated. GPUs Failed on
// their input (onInput) are in neither: nothing but a new spec changes
// them.
func outcomes(res *SyncResult) (failing, waiting string) {
	var f, w []string
	for _, idx := range slices.Sorted(maps.Keys(res.Results)) {
		g := res.Results[idx]
		part := fmt.Sprintf("%d:%s:%s", idx, g.Phase, g.Reason)
		switch {
		case g.Phase == v1alpha1.PhaseReady:
		case onInput(g):
		case failed(g, res.Stopped.Has(idx)):
			f = append(f, part)
		default:
			w = append(w, part)
		}
	}
	return strings.Join(f, ","), strings.Join(w, ",")
}

// failed reports whether g, a GPU's result (stopped: in SyncResult.Stopped),
// is a failure the failing backoff retries (see outcomes): Failed on an
// error that may pass, or Pending on a pass's failure.
func failed(g GPUResult, stopped bool) bool {
	switch g.Phase {
	case v1alpha1.PhaseFailed:
		return !onInput(g)
	case v1alpha1.PhasePending:
		return g.Reason == ReasonPassFailed || stopped
	}
	return false
}

// nextBackoff is the delay before the pass after res, one that left GPUs
// to retry. Failures and waits back off apart (each retryBackoff also
// starts again when its own outcome changes): a pass with a GPU failed
// takes the failing backoff, which passes without one reset; any other
// takes the waiting backoff, which only a pass that leaves nothing to retry
// resets. So a GPU that fails after waiting for many passes (its devices
// in use, then an NVML error on the change they allowed) is retried in
// about a second, not after the wait's grown delay, unless another GPU of
// the node has kept failing meanwhile; and a GPU that alternates between
// failing and waiting is retried no faster than the waiting backoff allows.
// (A pass that stops on an error, publishing nothing, is retried by
// controller-runtime's rate limiter and the Resync ticker instead.)
func (r *NodeReconciler) nextBackoff(res *SyncResult) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nextBackoffLocked(res, false)
}

// nextBackoffLocked is nextBackoff with r.mu held; with failingDeferred
// (GPUs that failed are deferred, not retried, this pass) a pass without a
// GPU failed does not reset the failing backoff.
func (r *NodeReconciler) nextBackoffLocked(res *SyncResult, failingDeferred bool) time.Duration {
	failing, waiting := outcomes(res)
	if failing != "" {
		return r.failing.next(failing, r.now())
	}
	if !failingDeferred {
		r.failing.reset()
	}
	return r.waiting.next(waiting, r.now())
}

// resetBackoff starts both backoffs again: a pass left nothing to retry.
func (r *NodeReconciler) resetBackoff() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing.reset()
	r.waiting.reset()
	clear(r.retryDue)
}

// failedRetry is a GPU whose change failed on an error that may pass
// (failed): what its spec asked for (specKey), its result, and when the
// failing backoff retries it.
type failedRetry struct {
	spec   string
	result GPUResult
	due    time.Time
}

// deferredGPUs returns, by index, the GPUs of specs whose failed change is
// not due for its retry yet, with the result they failed with: a pass that
// comes sooner (a ResourceClaim of the node changed, a Wake, the resync)
// leaves them as they are (Repartitioner.SyncDeferring), instead of
// draining their devices, waiting the settle period and reading every
// ResourceClaim again for a change that keeps failing. A GPU whose spec
// changed since (the layout or MIG mode) is not deferred.
//
// The GPUs are those of nml: a NodeMigLayout deleted and made again (under
// another UID) starts with none deferred.
func (r *NodeReconciler) deferredGPUs(nml *v1alpha1.NodeMigLayout) map[int]GPUResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if nml.UID != r.retryDueUID {
		clear(r.retryDue)
		r.retryDueUID = nml.UID
	}
	now := r.now()
	out := map[int]GPUResult{}
	for _, s := range nml.Spec.GPUs {
		f, ok := r.retryDue[int(s.Index)]
		if ok && f.spec == specKey(s) && now.Before(f.due) {
			out[int(s.Index)] = f.result
		}
	}
	return out
}

// retryAfter is the delay before the pass after res, one that left GPUs to
// retry, deferred those of its GPUs (deferredGPUs) it may have left as they
// were. A deferred GPU whose result is the one it was deferred with was not
// tried: it keeps its due. The backoffs judge the others (nextBackoff); each
// GPU that failed is due for its retry after the delay so found, and the
// pass after comes no later than the first GPU due.
func (r *NodeReconciler) retryAfter(specs []v1alpha1.GPUSpec, res *SyncResult, deferred map[int]GPUResult) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Deferred GPUs judged otherwise this pass (found on their layout, a
	// device in use, unreadable) are no longer deferred.
	deferred = maps.Clone(deferred)
	maps.DeleteFunc(deferred, func(idx int, g GPUResult) bool { return res.Results[idx] != g })
	tried := res
	if len(deferred) > 0 {
		tried = &SyncResult{Results: maps.Clone(res.Results), Stopped: res.Stopped, Retry: res.Retry}
		for idx := range deferred {
			delete(tried.Results, idx)
		}
	}
	var d time.Duration
	if failing, waiting := outcomes(tried); failing != "" || waiting != "" || len(deferred) == 0 {
		d = r.nextBackoffLocked(tried, len(deferred) > 0)
	}
	now := r.now()
	if r.retryDue == nil {
		r.retryDue = map[int]failedRetry{}
	}
	kept := map[int]bool{}
	for _, s := range specs {
		idx := int(s.Index)
		kept[idx] = true
		if _, ok := deferred[idx]; ok {
			continue
		}
		if g, ok := res.Results[idx]; ok && failed(g, res.Stopped.Has(idx)) && g.Reason != v1alpha1.ReasonGPUUnreadable {
			r.retryDue[idx] = failedRetry{spec: specKey(s), result: g, due: now.Add(d)}
		} else {
			delete(r.retryDue, idx)
		}
	}
	for idx, f := range r.retryDue {
		if !kept[idx] {
			delete(r.retryDue, idx)
			continue
		}
		if wait := f.due.Sub(now); d == 0 || wait < d {
			d = wait
		}
	}
	return max(d, time.Millisecond)
}
