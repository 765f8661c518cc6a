package gpulock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTryLock(t *testing.T) {
	var l Locks
	unlock, ok := l.TryLock(0)
	if !ok {
		t.Fatal("TryLock on a free GPU failed")
	}
	if _, ok := l.TryLock(0); ok {
		t.Fatal("TryLock on a held GPU succeeded")
	}
	u1, ok := l.TryLock(1)
	if !ok {
		t.Fatal("GPU 1 is locked by GPU 0's lock")
	}
	u1()
	unlock()
	unlock() // idempotent: must not release someone else's lock
	u2, ok := l.TryLock(0)
	if !ok {
		t.Fatal("TryLock after unlock failed")
	}
	unlock()
	if _, ok := l.TryLock(0); ok {
		t.Fatal("a second call of an old unlock released the new holder's lock")
	}
	u2()
}

func TestLockWaitsAndHonoursContext(t *testing.T) {
	l := New()
	unlock, err := l.Lock(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held GPU with an expiring context = %v", err)
	}
	// A context cancelled with a cause (a fatal error stopping the agent)
	// gives both: the stop (context.Canceled), which callers tell from a
	// failure, and the cause.
	fatal := errors.New("kubelet plugin failed")
	cctx, ccancel := context.WithCancelCause(t.Context())
	ccancel(fatal)
	if _, err := l.Lock(cctx, 3); !errors.Is(err, context.Canceled) || !errors.Is(err, fatal) {
		t.Fatalf("Lock on a held GPU with a context cancelled with a cause = %v, want context.Canceled and the cause", err)
	}
	got := make(chan func())
	go func() {
		u, err := l.Lock(t.Context(), 3)
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("Lock returned while the GPU was held")
	case <-time.After(20 * time.Millisecond):
	}
	unlock()
	(<-got)()
}

func TestReconfiguring(t *testing.T) {
	l := New()
	if l.Reconfiguring(0) {
		t.Fatal("fresh GPU reconfiguring")
	}
	end, err := l.BeginReconfigure(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Reconfiguring(0) || l.Reconfiguring(1) {
		t.Fatal("Reconfiguring wrong during reconfiguration")
	}
	if _, err := l.LockUnlessReconfiguring(t.Context(), 0); !errors.Is(err, ErrReconfiguring) {
		t.Fatalf("LockUnlessReconfiguring during reconfiguration = %v", err)
	}
	end()
	if l.Reconfiguring(0) {
		t.Fatal("still reconfiguring after end")
	}
	unlock, err := l.LockUnlessReconfiguring(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}

	// A waiter for a plainly held lock either gets it or, when a
	// reconfiguration takes the lock first, gives up instead of waiting for
	// the reconfiguration to end.
	type result struct {
		unlock func()
		err    error
	}
	waiter := make(chan result)
	go func() {
		u, err := l.LockUnlessReconfiguring(context.Background(), 0)
		waiter <- result{u, err}
	}()
	time.Sleep(10 * time.Millisecond)
	endc := make(chan func())
	go func() {
		e, err := l.BeginReconfigure(context.Background(), 0)
		if err != nil {
			panic(err)
		}
		endc <- e
	}()
	time.Sleep(10 * time.Millisecond)
	unlock()
	select {
	case r := <-waiter:
		switch {
		case r.err == nil:
			r.unlock() // the waiter won; the reconfiguration goes next
		case !errors.Is(r.err, ErrReconfiguring):
			t.Fatalf("waiter: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter stuck behind a reconfiguration")
	}
	(<-endc)()
	if l.Reconfiguring(0) {
		t.Fatal("still reconfiguring")
	}
}

// TestMutualExclusion: holders of one GPU's lock never overlap, each
// holding it across a yield to the other goroutines.
func TestMutualExclusion(t *testing.T) {
	var l Locks
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				u, err := l.Lock(context.Background(), 0)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				runtime.Gosched()
				time.Sleep(10 * time.Microsecond)
				inside.Add(-1)
				u()
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("the lock was held by two at once %d times", n)
	}
}

// TestReconfigurationNotHeldOff: while a reconfiguration waits for a GPU's
// lock (a prepare holds it), further prepares fail at once instead of taking
// the lock before it; a reconfiguration that gives up waiting (its context
// ends) lets prepares in again.
func TestReconfigurationNotHeldOff(t *testing.T) {
	l := New()
	prepare, err := l.LockUnlessReconfiguring(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	begun := make(chan func())
	go func() {
		end, err := l.BeginReconfigure(context.Background(), 0)
		if err != nil {
			panic(err)
		}
		begun <- end
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		waiting := l.state(0).waiting
		l.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reconfiguration never waited")
		}
		time.Sleep(time.Millisecond)
	}
	// Bounded: a prepare that waited instead of being refused would
	// otherwise hang the test until go test's own timeout.
	refuseCtx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := l.LockUnlessReconfiguring(refuseCtx, 0); !errors.Is(err, ErrReconfiguring) {
		t.Fatalf("a prepare while a reconfiguration waits: %v, want ErrReconfiguring at once", err)
	}
	prepare()
	end := <-begun
	if !l.Reconfiguring(0) {
		t.Error("not reconfiguring after BeginReconfigure returned")
	}
	end()

	// A reconfiguration that gives up waiting.
	hold, err := l.Lock(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.BeginReconfigure(ctx, 0); err == nil {
		t.Fatal("BeginReconfigure on a held lock returned before its context ended")
	}
	hold()
	u, err := l.LockUnlessReconfiguring(t.Context(), 0)
	if err != nil {
		t.Fatalf("a prepare after the reconfiguration gave up: %v", err)
	}
	u()
}
