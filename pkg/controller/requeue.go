package controller

import "time"

// A pass may have several reasons to look again with no event to wake it (a
// Lease about to expire, a GPU's passes failing long enough, a rollout slot
// held for a write the cache never showed, a batch window closing); it looks
// again at the first of them.

// sooner is the shorter of two requeue delays. A delay of 0 or less means
// none (controller-runtime does not requeue on it), so the other is kept.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case b <= 0:
		return max(a, 0)
	case a <= 0 || b < a:
		return b
	}
	return a
}

// earliest is the earlier of two times, the zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
