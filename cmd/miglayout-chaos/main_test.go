package main

import (
	"testing"
	"time"
)

// TestCheckFlags: scenario and round counts take 0 or more, the Auto
// windows more than 0; the first bad flag is named.
func TestCheckFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		scenarios, auto, rounds int
		window, liveness        time.Duration
		want                    string // "" for none
	}{
		"defaults":               {500, 0, 10, 12 * time.Second, 45 * time.Second, ""},
		"nothing to run":         {0, 0, 0, time.Second, time.Second, ""},
		"negative scenarios":     {-1, 0, 10, time.Second, time.Second, "-scenarios=-1: want 0 or more"},
		"negative Auto":          {0, -2, 10, time.Second, time.Second, "-auto-scenarios=-2: want 0 or more"},
		"negative rounds":        {0, 0, -3, time.Second, time.Second, "-race-rounds=-3: want 0 or more"},
		"no Auto window":         {0, 4, 0, 0, time.Second, "-auto-window=0s: want more than 0"},
		"negative Auto liveness": {0, 4, 0, time.Second, -time.Second, "-auto-liveness=-1s: want more than 0"},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := checkFlags(tc.scenarios, tc.auto, tc.rounds, tc.window, tc.liveness); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("checkFlags = %q, want %q", got, tc.want)
			}
		})
	}
}
