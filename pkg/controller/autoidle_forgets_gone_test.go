package controller

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestIdleTrackerForgetsGPUsGone: a GPU no snapshot holds any more (its
// node left Auto mode, or the GPU was taken out) is forgotten: seen idle
// again later, it counts from then, not from when it was first seen idle
// before it went, and is not given back whole early.
func TestIdleTrackerForgetsGPUsGone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	idle := a100GPU(t, "1g.10gb@0")
	with := func(at time.Time, gpus ...planner.GPU) planner.Snapshot {
		return planner.Snapshot{Now: at, Nodes: []planner.Node{reclaimingNode("n1", gpus...)}}
	}
	tr := idleTracker{}
	first := with(t0, idle)
	tr.mark(&first)
	gone := with(t0.Add(time.Hour))
	tr.mark(&gone)
	back := with(t0.Add(2*time.Hour), idle)
	wake := tr.mark(&back)
	if got, want := back.Nodes[0].GPUs[0].IdleSince, t0.Add(2*time.Hour); !got.Equal(want) {
		t.Errorf("IdleSince %s once back, want %s (counted afresh)", got, want)
	}
	if wake != time.Minute {
		t.Errorf("wake in %s once back, want %s", wake, time.Minute)
	}
}
