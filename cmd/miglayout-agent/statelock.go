package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// stateLockFile is the file in --state-dir that one agent process holds
// locked (flock) while it runs.
const stateLockFile = "agent.lock"

// stateLockPoll is how often a second agent tries the lock again.
const stateLockPoll = 200 * time.Millisecond

// lockStateDir takes an exclusive flock on dir/agent.lock, creating dir
// (0700) and the file as needed, and waits while another process holds it:
// two agents on one node (a pod force-deleted while its container still
// runs, a second release of the chart) would each miss the claims the other
// prepared and could destroy their devices, and would write one journal.
// The lock goes with the process (a crash releases it); release drops it.
// It fails when ctx ends first or the file cannot be opened.
func lockStateDir(ctx context.Context, dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	path := filepath.Join(dir, stateLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the state lock: %w", err)
	}
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told {
			klog.FromContext(ctx).Info("Another agent process holds the state lock: waiting for it to exit", "lock", path)
			told = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the state lock %s: %w", path, context.Cause(ctx))
		case <-time.After(stateLockPoll):
		}
	}
}

// releaseState returns run's deferred release of the state lock: unlock,
// unless *stuck (the manager did not stop in time, and a pass may still be
// inside NVML, destroying or creating a device): then the lock is left to
// go with the process, whose exit ends that call too, so that an agent
// waiting for it (a second process on the node) never starts while the
// old one can still change a GPU behind it.
func releaseState(unlock func(), stuck *bool) func() {
	return func() {
		if !*stuck {
			unlock()
		}
	}
}
