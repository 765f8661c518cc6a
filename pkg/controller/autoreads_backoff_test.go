package controller

import (
	"errors"
	"testing"
	"time"
)

// TestReadBackoffCapped: the wait a pass takes after failed passes in a row
// (ReadEvery off) is 5 ms doubled for each failure after the first, and
// never longer than maxFailureBackoff however many passes failed.
func TestReadBackoffCapped(t *testing.T) {
	for name, tc := range map[string]struct {
		failures int
		want     time.Duration
	}{
		"one":           {failures: 1, want: 5 * time.Millisecond},
		"three":         {failures: 3, want: 20 * time.Millisecond},
		"thirteen":      {failures: 13, want: 5 * time.Millisecond << 12},
		"fourteen":      {failures: 14, want: maxFailureBackoff},
		"a hundred":     {failures: 100, want: maxFailureBackoff},
		"none, no wait": {failures: 0},
	} {
		t.Run(name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := &AutoPlanner{ReadEvery: -1, Now: func() time.Time { return now }}
			if wait := a.readsDue(); wait != 0 {
				t.Fatalf("first pass waits %s, want it to read at once", wait)
			}
			for range tc.failures {
				a.passEnded(errors.New("injected"))
			}
			if wait := a.readsDue(); wait != tc.want {
				t.Errorf("after %d failed passes the next waits %s, want %s", tc.failures, wait, tc.want)
			}
		})
	}
}
