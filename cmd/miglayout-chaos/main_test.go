package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/chaos"
)

// TestCheckFlags: scenario and round counts take 0 or more, the main
// faults 1 to all of them, the Auto windows more than 0; the first bad flag
// is named.
func TestCheckFlags(t *testing.T) {
	all := len(chaos.PrimaryFaults)
	for name, tc := range map[string]struct {
		scenarios, auto, rounds, mainFaults int
		window, liveness                    time.Duration
		want                                string // "" for none
	}{
		"defaults":               {500, 0, 10, all, 12 * time.Second, 45 * time.Second, ""},
		"nothing to run":         {0, 0, 0, all, time.Second, time.Second, ""},
		"negative scenarios":     {-1, 0, 10, all, time.Second, time.Second, "-scenarios=-1: want 0 or more"},
		"negative Auto":          {0, -2, 10, all, time.Second, time.Second, "-auto-scenarios=-2: want 0 or more"},
		"negative rounds":        {0, 0, -3, all, time.Second, time.Second, "-race-rounds=-3: want 0 or more"},
		"the main faults of old": {0, 0, 0, 21, time.Second, time.Second, ""},
		"one main fault":         {0, 0, 0, 1, time.Second, time.Second, ""},
		"no main fault":          {0, 0, 0, 0, time.Second, time.Second, fmt.Sprintf("-main-faults=0: want 1 to %d", all)},
		"more main faults":       {0, 0, 0, all + 1, time.Second, time.Second, fmt.Sprintf("-main-faults=%d: want 1 to %d", all+1, all)},
		"no Auto window":         {0, 4, 0, all, 0, time.Second, "-auto-window=0s: want more than 0"},
		"negative Auto liveness": {0, 4, 0, all, time.Second, -time.Second, "-auto-liveness=-1s: want more than 0"},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := checkFlags(tc.scenarios, tc.auto, tc.rounds, tc.mainFaults, tc.window, tc.liveness); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("checkFlags = %q, want %q", got, tc.want)
			}
		})
	}
}
