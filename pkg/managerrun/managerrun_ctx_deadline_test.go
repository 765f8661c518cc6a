package managerrun

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStartContextDeadlineIsNotAGracePeriodRunningOut: where Start's own
// context ends by its deadline, a manager that stops returning that
// context's error (which wraps context.DeadlineExceeded) has stopped: it is
// not reported as a graceful shutdown that ran out.
func TestStartContextDeadlineIsNotAGracePeriodRunningOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	mgr := starter(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	err := Start(ctx, mgr, time.Minute)
	if errors.Is(err, ErrNotStopped) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start: %v, want the context's %v and not ErrNotStopped", err, context.DeadlineExceeded)
	}
}
