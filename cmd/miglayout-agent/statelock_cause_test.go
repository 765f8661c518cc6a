package main

import (
	"context"
	"errors"
	"testing"
)

// TestStateLockWaitEndsWithTheCause: an agent that stops while waiting for
// the state lock reports why it stopped, not only that it was cancelled.
func TestStateLockWaitEndsWithTheCause(t *testing.T) {
	dir := t.TempDir()
	holder, err := lockStateDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder()
	cause := errors.New("second signal")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if _, err := lockStateDir(ctx, dir); !errors.Is(err, cause) {
		t.Errorf("lockStateDir: %v, want the error to wrap %q", err, cause)
	}
}
