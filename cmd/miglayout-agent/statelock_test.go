package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/managerrun"
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

// TestStoppedEarly: the stop signal while the agent waits for the state
// lock ends it cleanly; any other error, or the manager not stopping in
// time, is a failure.
func TestStoppedEarly(t *testing.T) {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	holder, err := lockStateDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder()
	_, waitErr := lockStateDir(stopped, dir)
	for name, tc := range map[string]struct {
		ctx  context.Context
		err  error
		want bool
	}{
		"stopped while waiting for the lock": {stopped, waitErr, true},
		"failed while running":               {context.Background(), errors.New("loading kubeconfig: no such file"), false},
		"cancelled error, agent not stopped": {context.Background(), fmt.Errorf("x: %w", context.Canceled), false},
		"manager not stopped in time":        {stopped, fmt.Errorf("running manager: %w (%w)", managerrun.ErrNotStopped, context.Canceled), false},
	} {
		if got := stoppedEarly(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: stoppedEarly(%v) = %t, want %t", name, tc.err, got, tc.want)
		}
	}
}

// TestStateLockKeptWhenStuck: an agent whose manager did not stop in time
// (a pass may still be inside NVML) keeps the state lock when run returns,
// so that a waiting agent starts only once the process is gone; one that
// stopped cleanly releases it.
func TestStateLockKeptWhenStuck(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		t.Run(fmt.Sprintf("stuck=%t", stuck), func(t *testing.T) {
			dir := t.TempDir()
			unlock, err := lockStateDir(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			s := stuck
			releaseState(unlock, &s)()
			ctx, cancel := context.WithTimeout(context.Background(), 3*stateLockPoll)
			defer cancel()
			second, err := lockStateDir(ctx, dir)
			if err == nil {
				second()
			}
			if took := err == nil; took == stuck {
				t.Errorf("a second agent took the lock: %t, want %t", took, !stuck)
			}
			if stuck {
				unlock() // what the process's exit does
			}
		})
	}
}
