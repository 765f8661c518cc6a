package main

import (
	"testing"
	"time"
)

// TestNotNegative: count flags take 0 (their default) or more; a negative
// one is refused by name, the first by name where several are.
func TestNotNegative(t *testing.T) {
	for name, tc := range map[string]struct {
		counts map[string]int
		want   string // "" for none
	}{
		"defaults":       {map[string]int{"seeds": 0, "max-gpus": 0}, ""},
		"counts":         {map[string]int{"seeds": 3, "max-gpus": 8}, ""},
		"negative seeds": {map[string]int{"seeds": -1, "max-gpus": 8}, "-seeds=-1: want 0 or more"},
		"two negative":   {map[string]int{"seeds": -1, "max-gpus": -2}, "-max-gpus=-2: want 0 or more"},
		"negative last":  {map[string]int{"parallel": -3}, "-parallel=-3: want 0 or more"},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := notNegative(tc.counts); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("notNegative(%v) = %q, want %q", tc.counts, got, tc.want)
			}
		})
	}
}

// TestDurationNotNegative: -reclaim-idle-after takes 0 (never) or more.
func TestDurationNotNegative(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "", 5 * time.Minute: "", -time.Second: "-reclaim-idle-after=-1s: want 0 or more"} {
		got := ""
		if err := durationNotNegative("reclaim-idle-after", d); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("durationNotNegative(%v) = %q, want %q", d, got, want)
		}
	}
}
