package managerrun

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStartReturnsTheErrorOfAManagerStoppingLate: a manager that fails
// while it stops, after its context ended, has that error returned, not
// nil.
func TestStartReturnsTheErrorOfAManagerStoppingLate(t *testing.T) {
	failed := errors.New("runnable failed while stopping")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mgr := starter(func(ctx context.Context) error {
		<-ctx.Done()
		return failed
	})
	if err := Start(ctx, mgr, time.Minute); !errors.Is(err, failed) {
		t.Errorf("Start: %v, want %v", err, failed)
	}
}

// TestStopWithinOutlastsGracefulShutdown: Start waits longer than the
// manager's own graceful shutdown (controller-runtime's default of 30 s,
// which both binaries keep), so that a manager stopping in time is never
// reported as not stopped.
func TestStopWithinOutlastsGracefulShutdown(t *testing.T) {
	const gracefulShutdown = 30 * time.Second
	if StopWithin <= gracefulShutdown {
		t.Errorf("StopWithin = %s, want more than the manager's graceful shutdown, %s", StopWithin, gracefulShutdown)
	}
}
