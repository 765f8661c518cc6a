package controller

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestIdleTrackerBusyGPUs: a GPU counts as idle only with no device pinned,
// none held with admin access only (shared) and no change in flight; a busy
// one has no IdleSince, whatever its agent reports, and wakes nobody.
func TestIdleTrackerBusyGPUs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		edit     func(g *planner.GPU)
		wantIdle bool
	}{
		"idle":     {edit: func(*planner.GPU) {}, wantIdle: true},
		"pinned":   {edit: func(g *planner.GPU) { g.Pinned = mig.MustParseLayout("1g.10gb@0") }},
		"shared":   {edit: func(g *planner.GPU) { g.Shared = mig.MustParseLayout("1g.10gb@0") }},
		"changing": {edit: func(g *planner.GPU) { g.Changing = true }},
	} {
		t.Run(name, func(t *testing.T) {
			g := a100GPU(t, "1g.10gb@0")
			g.IdleSince = t0.Add(-time.Hour)
			tc.edit(&g)
			snap := planner.Snapshot{Now: t0, Nodes: []planner.Node{reclaimingNode("n1", g)}}
			(idleTracker{}).mark(&snap)
			if got := !snap.Nodes[0].GPUs[0].IdleSince.IsZero(); got != tc.wantIdle {
				t.Errorf("counted idle: %t, want %t (IdleSince %s)", got, tc.wantIdle, snap.Nodes[0].GPUs[0].IdleSince)
			}
		})
	}
}

// TestIdleTrackerWakesOnlyForWhatFallsDueLater: a GPU already due to be
// given back (by its agent's count, at the controller's start) is planned
// now and asks for no wake-up: the wake is for the next GPU that falls due
// later, or none.
func TestIdleTrackerWakesOnlyForWhatFallsDueLater(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := func(name string, agentSince time.Time) planner.Node {
		g := a100GPU(t, "1g.10gb@0")
		g.IdleSince = agentSince
		return reclaimingNode(name, g)
	}
	for name, tc := range map[string]struct {
		nodes    []planner.Node
		wantWake time.Duration
	}{
		"due already":                      {nodes: []planner.Node{n("n1", t0.Add(-time.Hour))}},
		"due already, another in a minute": {nodes: []planner.Node{n("n1", t0.Add(-time.Hour)), n("n2", time.Time{})}, wantWake: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			snap := planner.Snapshot{Now: t0, Nodes: tc.nodes}
			if wake := (idleTracker{}).mark(&snap); wake != tc.wantWake {
				t.Errorf("wake in %s, want %s", wake, tc.wantWake)
			}
		})
	}
}
