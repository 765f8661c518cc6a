package agent

import (
	"testing"
	"time"
)

// TestNewOutcomeResetsOnceTenMinutesHavePassed: a new outcome resets the
// backoff once outcomeResetEvery has passed since the last reset, at that
// very instant, not before.
func TestNewOutcomeResetsOnceTenMinutesHavePassed(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var rb retryBackoff
	rb.next("a", start)
	rb.next("b", start) // a new outcome: the first reset
	for range 12 {
		rb.next("b", start)
	}
	if d := rb.next("c", start.Add(outcomeResetEvery-time.Nanosecond)); d < 30*time.Second {
		t.Errorf("a new outcome a nanosecond before %s since the last reset: retry after %s, want the grown delay (at least 30s)", outcomeResetEvery, d)
	}
	if d := rb.next("d", start.Add(outcomeResetEvery)); d > 1500*time.Millisecond {
		t.Errorf("a new outcome %s after the last reset: retry after %s, want about a second (at most 1.5s)", outcomeResetEvery, d)
	}
}

// TestBackoffStopsGrowingAtTwoMinutes: passes that end alike for long are
// retried at most two minutes apart, give or take the backoff's ±50 %:
// never more than 3 minutes.
func TestBackoffStopsGrowingAtTwoMinutes(t *testing.T) {
	g := newBackoffRig()
	g.grown(t, blocked0, 20, 30*time.Second, "blocked")
	for i := range 30 {
		if d := g.pass(blocked0); d > 3*time.Minute {
			t.Fatalf("pass %d after the delay stopped growing: retry after %s, want at most 3m (2m ±50%%)", 20+i, d)
		}
	}
}

// TestResetBackoffLeavesTheOutcomeResetUnspent: after a pass that left
// nothing to retry, the first outcome starts from about a second without
// spending the reset a new outcome may make every outcomeResetEvery, so a
// new outcome a minute later starts from about a second too.
func TestResetBackoffLeavesTheOutcomeResetUnspent(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var rb retryBackoff
	rb.next("a", start)
	rb.next("b", start) // a new outcome: a reset, at start
	rb.reset()
	later := start.Add(2 * outcomeResetEvery)
	for range 9 {
		rb.next("c", later)
	}
	if d := rb.next("d", later.Add(time.Minute)); d > 1500*time.Millisecond {
		t.Errorf("a new outcome a minute after the first one since the backoff was reset: retry after %s, want about a second (at most 1.5s)", d)
	}
}
