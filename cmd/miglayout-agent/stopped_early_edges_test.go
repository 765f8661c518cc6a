package main

import (
	"context"
	"errors"
	"testing"
)

// TestStoppedEarlyNeedsTheCancellation: an agent that fails for another
// reason while the stop signal arrives (the kubeconfig not loaded, NVML not
// opened) has failed: only the wait for the state lock ended by the signal
// is a normal exit.
func TestStoppedEarlyNeedsTheCancellation(t *testing.T) {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if stoppedEarly(stopped, errors.New("loading kubeconfig: no such file")) {
		t.Error("a failure other than the cancellation, after the stop signal, is taken for a normal exit")
	}
}
