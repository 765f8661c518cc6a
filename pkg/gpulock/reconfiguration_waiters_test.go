package gpulock

import (
	"errors"
	"testing"
	"testing/synctest"
)

// A prepare already waiting for a GPU's lock (another holder has it) is
// refused with ErrReconfiguring as soon as a reconfiguration starts waiting
// for the lock, without waiting for the holder to let go.
func TestWaitingPrepareRefusedWhenReconfigurationStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		hold, err := l.Lock(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		prepared := make(chan error, 1)
		go func() {
			u, err := l.LockUnlessReconfiguring(t.Context(), 0)
			if u != nil {
				u()
			}
			prepared <- err
		}()
		synctest.Wait() // the prepare waits for the holder
		select {
		case err := <-prepared:
			t.Fatalf("prepare returned %v while the lock was held, want it to wait", err)
		default:
		}
		ended := make(chan func(), 1)
		go func() {
			end, err := l.BeginReconfigure(t.Context(), 0)
			if err != nil {
				t.Errorf("BeginReconfigure = %v", err)
			}
			ended <- end
		}()
		synctest.Wait() // the reconfiguration waits for the holder too
		stillWaiting := false
		select {
		case err := <-prepared:
			if !errors.Is(err, ErrReconfiguring) {
				t.Errorf("waiting prepare = %v, want %v", err, ErrReconfiguring)
			}
		default:
			stillWaiting = true
			t.Errorf("prepare still waiting after a reconfiguration started waiting, want it refused with %v", ErrReconfiguring)
		}
		hold()
		if end := <-ended; end != nil {
			end()
		}
		if stillWaiting {
			<-prepared
		}
	})
}

// A plain Lock (the repartitioner's own, not a prepare) is never refused
// for a reconfiguration: it waits while one is pending or running and gets
// the lock once the reconfiguration ends.
func TestPlainLockWaitsThroughReconfiguration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		end, err := l.BeginReconfigure(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			unlock func()
			err    error
		}
		got := make(chan result, 1)
		go func() {
			u, err := l.Lock(t.Context(), 0)
			got <- result{u, err}
		}()
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("Lock during a reconfiguration returned (err %v), want it to wait until the reconfiguration ends", r.err)
		default:
		}
		end()
		r := <-got
		if r.err != nil {
			t.Fatalf("Lock after the reconfiguration ended = %v, want the lock", r.err)
		}
		r.unlock()
	})
}
