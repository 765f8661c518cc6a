package gpulock

import (
	"context"
	"errors"
	"testing"
)

// TestReconfigurationGivenUpMarksNothing: a BeginReconfigure whose context
// ends while another holder has the lock fails and leaves the GPU not
// reconfiguring: Reconfiguring reports false, and a prepare waits for the
// holder (here until its own context ends) instead of being refused with
// ErrReconfiguring.
func TestReconfigurationGivenUpMarksNothing(t *testing.T) {
	l := New()
	hold, err := l.Lock(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.BeginReconfigure(ended, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("BeginReconfigure with its context ended = %v, want %v", err, context.Canceled)
	}
	if l.Reconfiguring(0) {
		t.Error("GPU 0 reconfiguring after its reconfiguration gave up")
	}
	if _, err := l.LockUnlessReconfiguring(ended, 0); errors.Is(err, ErrReconfiguring) || !errors.Is(err, context.Canceled) {
		t.Errorf("LockUnlessReconfiguring on the held lock = %v, want %v (waited), not %v", err, context.Canceled, ErrReconfiguring)
	}
}
