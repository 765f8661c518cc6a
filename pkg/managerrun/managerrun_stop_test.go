package managerrun

import (
	"context"
	"errors"
	"fmt"
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

// TestStartSaysNotStoppedWhereTheGracePeriodRanOut: a manager that returns
// because its graceful shutdown ran out with a runnable still running (as
// controller-runtime words it) is reported not stopped, so that the caller
// does not wait on what that runnable holds; one that fails otherwise while
// stopping is not.
func TestStartSaysNotStoppedWhereTheGracePeriodRanOut(t *testing.T) {
	for name, tc := range map[string]struct {
		err         error
		wantStopped bool
	}{
		"grace period ran out": {err: fmt.Errorf("failed waiting for all runnables to end within grace period of 30s: %w", context.DeadlineExceeded)},
		"a runnable failed":    {err: errors.New("runnable failed while stopping"), wantStopped: true},
		"stopped":              {wantStopped: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			mgr := starter(func(ctx context.Context) error {
				<-ctx.Done()
				return tc.err
			})
			err := Start(ctx, mgr, time.Minute)
			if errors.Is(err, ErrNotStopped) == tc.wantStopped {
				t.Errorf("Start: %v; want ErrNotStopped %v", err, !tc.wantStopped)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("Start: %v, want it to wrap %v", err, tc.err)
			}
		})
	}
}
