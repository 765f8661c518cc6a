package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// passResult is a SyncResult that leaves GPUs to retry, from index to phase
// and reason.
func passResult(gpus map[int][2]string) *SyncResult {
	res := &SyncResult{Retry: true, Results: map[int]GPUResult{}}
	for idx, pr := range gpus {
		res.Results[idx] = GPUResult{Phase: v1alpha1.GPUPhase(pr[0]), Reason: pr[1]}
	}
	return res
}

var (
	blocked0 = passResult(map[int][2]string{
		0: {string(v1alpha1.PhaseBlocked), v1alpha1.ReasonDeviceInUse},
		1: {string(v1alpha1.PhaseReady), v1alpha1.ReasonLayoutApplied},
	})
	failing1 = passResult(map[int][2]string{
		0: {string(v1alpha1.PhaseBlocked), v1alpha1.ReasonDeviceInUse},
		1: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonNVMLError},
	})
	failing0 = passResult(map[int][2]string{
		0: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonNVMLError},
		1: {string(v1alpha1.PhaseReady), v1alpha1.ReasonLayoutApplied},
	})
)

// backoffRig is a NodeReconciler whose clock moves on by each delay its
// nextBackoff returns, as though each pass came at its retry.
type backoffRig struct {
	now time.Time
	r   *NodeReconciler
}

func newBackoffRig() *backoffRig {
	g := &backoffRig{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	g.r = &NodeReconciler{Now: func() time.Time { return g.now }}
	return g
}

// pass ends one pass with o, waits its delay and returns it.
func (g *backoffRig) pass(o *SyncResult) time.Duration {
	d := g.r.nextBackoff(o)
	g.now = g.now.Add(d)
	return d
}

// alternate ends passes with a and b by turns for span and returns how
// many there were.
func (g *backoffRig) alternate(a, b *SyncResult, span time.Duration) int {
	passes := 0
	for end := g.now.Add(span); g.now.Before(end); passes++ {
		o := a
		if passes%2 == 1 {
			o = b
		}
		g.pass(o)
	}
	return passes
}

// grown ends n passes with o and stops the test unless the last delay is
// at least least.
func (g *backoffRig) grown(t *testing.T, o *SyncResult, n int, least time.Duration, what string) {
	t.Helper()
	var d time.Duration
	for range n {
		d = g.pass(o)
	}
	if d < least {
		t.Fatalf("after %d passes %s alike the delay is %s, want it grown past %s", n, what, d, least)
	}
}

func TestOutcomes(t *testing.T) {
	cases := map[string]struct {
		gpus                  map[int][2]string
		stopped               []int // SyncResult.Stopped
		wantFailing, wantWait string
	}{
		"blocked and ready": {
			gpus:     map[int][2]string{0: {"Blocked", v1alpha1.ReasonDeviceInUse}, 1: {"Ready", v1alpha1.ReasonLayoutApplied}},
			wantWait: "0:Blocked:" + v1alpha1.ReasonDeviceInUse,
		},
		"NVML error beside a blocked GPU": {
			gpus:        map[int][2]string{2: {"Failed", v1alpha1.ReasonNVMLError}, 0: {"Blocked", v1alpha1.ReasonDeviceInUse}},
			wantFailing: "2:Failed:" + v1alpha1.ReasonNVMLError,
			wantWait:    "0:Blocked:" + v1alpha1.ReasonDeviceInUse,
		},
		"a stopped change fails, a changed spec waits": {
			gpus:        map[int][2]string{0: {"Pending", ReasonPassFailed}, 1: {"Pending", v1alpha1.ReasonPending}},
			wantFailing: "0:Pending:" + ReasonPassFailed,
			wantWait:    "1:Pending:" + v1alpha1.ReasonPending,
		},
		"a change stopped before its NVML work fails, though shown Pending": {
			gpus:        map[int][2]string{0: {"Pending", v1alpha1.ReasonPending}, 1: {"Pending", v1alpha1.ReasonPending}},
			stopped:     []int{1},
			wantFailing: "1:Pending:" + v1alpha1.ReasonPending,
			wantWait:    "0:Pending:" + v1alpha1.ReasonPending,
		},
		"input failures are neither": {
			gpus: map[int][2]string{0: {"Failed", v1alpha1.ReasonInvalidLayout}, 1: {"Failed", v1alpha1.ReasonUnknownGPU}},
		},
		"unreadable GPUs fail, in index order": {
			gpus:        map[int][2]string{3: {"Failed", v1alpha1.ReasonGPUUnreadable}, 1: {"Failed", v1alpha1.ReasonNVMLError}},
			wantFailing: "1:Failed:" + v1alpha1.ReasonNVMLError + ",3:Failed:" + v1alpha1.ReasonGPUUnreadable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := passResult(tc.gpus)
			res.Stopped = sets.New(tc.stopped...)
			f, w := outcomes(res)
			if diff := cmp.Diff([2]string{tc.wantFailing, tc.wantWait}, [2]string{f, w}); diff != "" {
				t.Errorf("outcomes (failing, waiting) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBackoffGrowsWhileTheOutcomeRepeats: passes that end with the same
// GPU Blocked back off longer and longer; a pass that ends with a GPU
// failing anew beside it starts from about a second, so the new failure is
// not retried after the long wait's delay; failures that repeat back off
// in turn.
func TestBackoffGrowsWhileTheOutcomeRepeats(t *testing.T) {
	g := newBackoffRig()
	g.grown(t, blocked0, 12, 20*time.Second, "blocked")
	if d := g.r.nextBackoff(failing1); d > 2*time.Second {
		t.Errorf("a pass whose GPU 1 failed anew retries after %s, want about a second", d)
	}
	if d := g.r.nextBackoff(failing1); d > 3*time.Second {
		t.Errorf("the second pass alike retries after %s, want the backoff's second step", d)
	}
	g.grown(t, failing1, 12, 20*time.Second, "failing")
}

// TestNewOutcomeResetsAtMostEvery10Minutes: a wait for another reason (GPU
// 0 needing a reset, after many passes waiting for a device in use) starts
// from about a second; waits whose reasons alternate pass after pass, for
// half an hour, still back off (a reset every outcomeResetEvery at most:
// about as few passes as a steady outcome's, not one a second).
func TestNewOutcomeResetsAtMostEvery10Minutes(t *testing.T) {
	g := newBackoffRig()
	resetWait := passResult(map[int][2]string{0: {string(v1alpha1.PhaseBlocked), v1alpha1.ReasonResetRequired}})
	g.grown(t, blocked0, 12, 20*time.Second, "blocked")
	if d := g.r.nextBackoff(resetWait); d > 2*time.Second {
		t.Errorf("a wait for another reason retries after %s, want about a second", d)
	}
	if passes := g.alternate(blocked0, resetWait, 30*time.Minute); passes > 80 {
		t.Errorf("%d passes in half an hour of waits alternating, want at most 80", passes)
	}
}

// TestFailureAfterAWaitIsRetriedSoon: GPU 0 fails pass after pass, then is
// blocked pass after pass (its device in use), and its next change then
// fails again (an NVML error that leaves a GPU instance without its compute
// instance): it is retried in about a second, not after the delay its
// first failures had grown to, nor the waits': waits and failures back off
// apart, and a pass without failure starts the failures' backoff again.
func TestFailureAfterAWaitIsRetriedSoon(t *testing.T) {
	g := newBackoffRig()
	g.grown(t, failing0, 8, 8*time.Second, "failing")
	g.grown(t, blocked0, 11, 10*time.Second, "blocked")
	if d := g.r.nextBackoff(failing0); d > 2*time.Second {
		t.Errorf("GPU 0 failing again after its failures and waits retries after %s, want about a second", d)
	}
}

// TestAlternatingOutcomesStillBackOff: a GPU that fails and waits by turns,
// pass after pass, for half an hour, is retried about as seldom as the
// waiting backoff allows (about 25 waits in half an hour, each followed by
// a failure retried in a second or two), not every second.
func TestAlternatingOutcomesStillBackOff(t *testing.T) {
	g := newBackoffRig()
	if passes := g.alternate(blocked0, failing0, 30*time.Minute); passes > 80 {
		t.Errorf("%d passes in half an hour of alternating outcomes, want at most 80", passes)
	}
	g.r.resetBackoff()
	if d := g.r.nextBackoff(blocked0); d > 2*time.Second {
		t.Errorf("after a pass that left nothing to retry, a wait retries after %s, want about a second", d)
	}
}

// TestFirstFailureAfterAWaitLeavesTheResetUnspent: failures that begin
// again after a wait start from about a second without spending the reset a new
// outcome may make every outcomeResetEvery, so a GPU failing anew beside
// them a minute later is retried in about a second too.
func TestFirstFailureAfterAWaitLeavesTheResetUnspent(t *testing.T) {
	g := newBackoffRig()
	bothFailing := passResult(map[int][2]string{
		0: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonNVMLError},
		1: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonNVMLError},
	})
	g.pass(failing0)
	g.pass(blocked0)
	g.grown(t, failing0, 8, 8*time.Second, "failing")
	if d := g.r.nextBackoff(bothFailing); d > 2*time.Second {
		t.Errorf("GPU 1 failing anew beside GPU 0 retries after %s, want about a second", d)
	}
}
