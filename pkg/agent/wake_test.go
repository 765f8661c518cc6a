package agent

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestWakeStartsAPassBeforeResync: the ticker sends the node's
// NodeMigLayout at start, then on Wake without waiting for the (here one
// hour) resync period; wakes while one is pending make one pass.
func TestWakeStartsAPassBeforeResync(t *testing.T) {
	r := &NodeReconciler{NodeName: "n1", Resync: time.Hour}
	ticks := make(chan event.GenericEvent)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- r.tick(ticks)(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ticker: %v", err)
		}
	}()

	next := func(what string) bool {
		t.Helper()
		select {
		case ev := <-ticks:
			if ev.Object.GetName() != "n1" {
				t.Errorf("%s: tick for %q, want n1", what, ev.Object.GetName())
			}
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	// The ticker waits to hand over its first tick: three wakes now are
	// one pending wake.
	for range 3 {
		r.Wake()
	}
	if !next("start") {
		t.Fatal("no tick at start")
	}
	if !next("wake") {
		t.Fatal("no tick after Wake (the next resync is an hour away)")
	}
	select {
	case <-ticks:
		t.Error("a second tick for wakes made while one was pending")
	case <-time.After(100 * time.Millisecond):
	}
	r.Wake()
	if !next("second wake") {
		t.Fatal("no tick after a later Wake")
	}
}

// TestWakeBeforeSetupDoesNotBlock: the kubelet plugin may unprepare before
// the manager starts the ticker.
func TestWakeBeforeSetupDoesNotBlock(t *testing.T) {
	r := &NodeReconciler{NodeName: "n1"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			r.Wake()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wake before setup blocks")
	}
}
