package controller

import "time"

// DefaultReadEvery is miglayout-controller's AutoPlanner.ReadEvery: the
// Auto planner reads its inputs at most twice a second.
const DefaultReadEvery = 500 * time.Millisecond

// readEvery is how long a pass waits after the previous one read the
// inputs: ReadEvery, at most a quarter of the idle window, so batching
// still sees demand go quiet; 0 when ReadEvery is 0 or negative.
func (a *AutoPlanner) readEvery() time.Duration {
	if a.ReadEvery <= 0 {
		return 0
	}
	return min(a.ReadEvery, a.idle()/4)
}

// readsDue tells a pass how long to wait before it reads the inputs (0: read
// now, noted as the last read). Every watched change wakes the planner, and
// a pass reads and snapshots every node, pod and claim before batching can
// tell whether the change matters (about 0.1 s of CPU at 1000 nodes of 8
// GPUs and 5000 pending pods, BenchmarkAutoPass): under a stream of claim
// and status changes, passes one after the other would keep a core busy.
// Changes closer together than readEvery are read by one pass; a wait asks
// the queue for the key again when it ends, which an earlier requeue of the
// key does not delay.
func (a *AutoPlanner) readsDue() time.Duration {
	every := a.readEvery()
	if every <= 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if !a.lastRead.IsZero() {
		if next := a.lastRead.Add(every); now.Before(next) {
			return next.Sub(now)
		}
	}
	a.lastRead = now
	return 0
}

// readFailed lets the next pass read at once: after a failed pass the
// queue's failure backoff, not readEvery, spaces the tries (a wait ends
// with no error, which would reset that backoff).
func (a *AutoPlanner) readFailed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastRead = time.Time{}
}
