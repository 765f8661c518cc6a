package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestAutoPlannerDurations: the planner's durations as set, and their
// defaults where unset (0); a negative UnboundAfter or AgingAfter turns
// the check off (0).
func TestAutoPlannerDurations(t *testing.T) {
	type durations struct {
		Idle, Max, UnboundAfter, DeclinedFor, AgingAfter time.Duration
	}
	got := func(a *AutoPlanner) durations {
		return durations{a.idle(), a.max(), a.unboundAfter(), a.declinedFor(), a.agingAfter()}
	}
	for name, tc := range map[string]struct {
		a    *AutoPlanner
		want durations
	}{
		"unset: the defaults": {&AutoPlanner{},
			durations{2 * time.Second, 10 * time.Second, DefaultUnboundAfter, DefaultDeclinedFor, planner.DefaultAgingAfter}},
		"set": {&AutoPlanner{Idle: 3 * time.Second, Max: 30 * time.Second, UnboundAfter: 2 * time.Minute, DeclinedFor: 3 * time.Minute, AgingAfter: 4 * time.Hour},
			durations{3 * time.Second, 30 * time.Second, 2 * time.Minute, 3 * time.Minute, 4 * time.Hour}},
		"negative checks off": {&AutoPlanner{UnboundAfter: -1, AgingAfter: -1},
			durations{2 * time.Second, 10 * time.Second, 0, DefaultDeclinedFor, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, got(tc.a)); diff != "" {
				t.Errorf("durations (-want +got):\n%s", diff)
			}
		})
	}
}
