package managerrun

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStartGivesUpOnAStuckManagerAfterStopWithin: a manager that never
// stops is left once the stopWithin given to Start has passed after the
// stop signal: not sooner (a manager still stopping gracefully gets that
// long), and not a multiple of it later (the kubelet's grace period, 45 s
// in the chart, allows StopWithin once).
func TestStartGivesUpOnAStuckManagerAfterStopWithin(t *testing.T) {
	const stopWithin = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	stuck := starter(func(context.Context) error {
		select {} // as runnableGroup.Start waiting for a cache
	})
	done := make(chan error, 1)
	go func() { done <- Start(ctx, stuck, stopWithin) }()
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		elapsed := time.Since(stopped)
		if !errors.Is(err, ErrNotStopped) {
			t.Errorf("Start: %v, want %v", err, ErrNotStopped)
		}
		if elapsed < stopWithin {
			t.Errorf("Start gave up %v after the stop signal, before the %v it was given", elapsed, stopWithin)
		}
	case <-time.After(stopWithin * 9 / 5):
		t.Fatalf("Start still waiting %v after the stop signal, given %v", time.Since(stopped), stopWithin)
	}
}
