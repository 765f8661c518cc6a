package controller

import "time"

// DefaultReadEvery is miglayout-controller's AutoPlanner.ReadEvery: the
// Auto planner reads its inputs at most twice a second.
const DefaultReadEvery = 500 * time.Millisecond

// readFailureBackoff is the first wait after a failed pass, doubled for each
// failure in a row up to maxFailureBackoff.
const readFailureBackoff = 5 * time.Millisecond

// readEvery is how long a pass waits after the previous one read the
// inputs: ReadEvery, at most a quarter of the batching window's idle and
// maximum durations, so that batching still sees demand go quiet and plans
// within about Max; 0 when ReadEvery is 0 or negative.
func (a *AutoPlanner) readEvery() time.Duration {
	if a.ReadEvery <= 0 {
		return 0
	}
	return min(a.ReadEvery, a.idle()/4, a.max()/4)
}

// readsDue tells a pass how long to wait before it reads the inputs (0: read
// now, noted as the last read). Every watched change wakes the planner, and
// a pass reads and snapshots every node, pod and claim before batching can
// tell whether the change matters (about 0.1 s of CPU at 1000 nodes of 8
// GPUs and 5000 pending pods, BenchmarkAutoPass): under a stream of claim
// and status changes, passes one after the other would keep a core busy.
// Changes closer together than readEvery are read by one pass; after
// failed passes in a row (with ReadEvery off too) the wait is at least
// their backoff (5 ms doubled for each, up to 30 s), which the queue's own
// cannot hold: a change enqueues the key at once, and a wait that ends
// with no error resets the queue's backoff. A wait asks the queue for the
// key again when it ends, which an earlier requeue of the key does not
// delay.
func (a *AutoPlanner) readsDue() time.Duration {
	every := a.readEvery()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.readFailures > 0 {
		every = max(every, min(readFailureBackoff<<min(a.readFailures-1, 20), maxFailureBackoff))
	}
	now := a.now()
	if every > 0 && !a.lastRead.IsZero() {
		if next := a.lastRead.Add(every); now.Before(next) {
			return next.Sub(now)
		}
	}
	a.lastRead = now
	return 0
}

// passEnded counts the failed passes in a row (readsDue).
func (a *AutoPlanner) passEnded(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.readFailures++
	} else {
		a.readFailures = 0
	}
}
