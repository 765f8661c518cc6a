package main

import (
	"context"
	"testing"
	"time"
)

// TestStateLockWaitsForTheHolder: a second agent on the same state
// directory waits while the first holds the lock, and takes it once the
// first lets go.
func TestStateLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	release, err := lockStateDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*stateLockPoll)
	defer cancel()
	if _, err := lockStateDir(ctx, dir); err == nil {
		t.Fatal("a second agent took the lock the first holds")
	}
	got := make(chan error, 1)
	go func() {
		r, err := lockStateDir(context.Background(), dir)
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(2 * stateLockPoll)
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting agent: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting agent did not take the lock once it was released")
	}
}
