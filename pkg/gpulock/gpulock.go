// Package gpulock is the per-GPU lock that the agent's repartitioner and its
// DRA kubelet plugin share inside the agent process.
//
// The repartitioner holds a GPU's lock for the whole of a reconfiguration
// (BeginReconfigure ... end), during which Reconfiguring reports true. The
// kubelet plugin prepares a claim's devices under the lock of each GPU
// involved (LockUnlessReconfiguring): it fails at once, with an error
// wrapping ErrReconfiguring, while the GPU is being reconfigured or a
// reconfiguration waits for the lock, and
// otherwise checks that the device exists and records it as prepared before
// it lets go. The repartitioner, holding the lock, therefore sees every
// prepared device and never destroys one (design invariant 1), and a claim is
// never prepared on a device that is half destroyed.
//
// Locks are in-process and not reentrant; the zero value of Locks is ready to
// use. Every unlock function is idempotent.
package gpulock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrReconfiguring is wrapped by the error LockUnlessReconfiguring returns
// while the GPU is being reconfigured.
var ErrReconfiguring = errors.New("GPU is being reconfigured")

// Locks holds one lock per GPU index.
type Locks struct {
	mu   sync.Mutex
	gpus map[int]*state
}

type state struct {
	held          bool
	reconfiguring bool
	// waiting counts BeginReconfigure calls waiting for the lock: while
	// one waits, LockUnlessReconfiguring fails as during the
	// reconfiguration, so that prepares taking the lock one after another
	// cannot hold a repartition off.
	waiting int
	// changed is closed, and replaced, on every state change.
	changed chan struct{}
}

// New returns an empty set of locks (the zero value works as well).
func New() *Locks { return &Locks{} }

// state returns the state of GPU i; l.mu is held.
func (l *Locks) state(i int) *state {
	if l.gpus == nil {
		l.gpus = map[int]*state{}
	}
	s, ok := l.gpus[i]
	if !ok {
		s = &state{changed: make(chan struct{})}
		l.gpus[i] = s
	}
	return s
}

// notify wakes every waiter on s; l.mu is held.
func (s *state) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// lock waits until GPU i is free and takes it; with failIfReconfiguring it
// gives up with ErrReconfiguring when the GPU is, or starts being,
// reconfigured.
func (l *Locks) lock(ctx context.Context, i int, failIfReconfiguring bool) (func(), error) {
	for {
		l.mu.Lock()
		s := l.state(i)
		if failIfReconfiguring && (s.reconfiguring || s.waiting > 0) {
			l.mu.Unlock()
			return nil, fmt.Errorf("locking GPU %d: %w", i, ErrReconfiguring)
		}
		if !s.held {
			s.held = true
			l.mu.Unlock()
			return l.unlocker(i), nil
		}
		ch := s.changed
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			// ctx.Err() (context.Canceled, DeadlineExceeded) always,
			// so that callers tell a stop from a failure; the cause too
			// where one was given (a fatal error that stops the agent).
			if cause := context.Cause(ctx); cause != ctx.Err() {
				return nil, fmt.Errorf("locking GPU %d: %w: %w", i, ctx.Err(), cause)
			}
			return nil, fmt.Errorf("locking GPU %d: %w", i, ctx.Err())
		case <-ch:
		}
	}
}

func (l *Locks) unlocker(i int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			s := l.state(i)
			s.held, s.reconfiguring = false, false
			s.notify()
		})
	}
}

// Lock waits until GPU i's lock is free (or ctx ends) and takes it. Call the
// returned function to release it.
func (l *Locks) Lock(ctx context.Context, gpuIndex int) (unlock func(), err error) {
	return l.lock(ctx, gpuIndex, false)
}

// TryLock takes GPU i's lock if it is free, without waiting.
func (l *Locks) TryLock(gpuIndex int) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(gpuIndex)
	if s.held {
		return nil, false
	}
	s.held = true
	return l.unlocker(gpuIndex), true
}

// LockUnlessReconfiguring is Lock for the kubelet plugin: it fails at once
// with an error wrapping ErrReconfiguring while the GPU is being
// reconfigured, including when the reconfiguration starts while it waits.
func (l *Locks) LockUnlessReconfiguring(ctx context.Context, gpuIndex int) (unlock func(), err error) {
	return l.lock(ctx, gpuIndex, true)
}

// BeginReconfigure takes GPU i's lock (waiting as Lock does) and marks the
// GPU as being reconfigured until end is called, which also releases the
// lock. While it waits, LockUnlessReconfiguring fails already.
func (l *Locks) BeginReconfigure(ctx context.Context, gpuIndex int) (end func(), err error) {
	l.mu.Lock()
	s := l.state(gpuIndex)
	s.waiting++
	s.notify()
	l.mu.Unlock()
	unlock, err := l.lock(ctx, gpuIndex, false)
	l.mu.Lock()
	s = l.state(gpuIndex)
	s.waiting--
	if err == nil {
		s.reconfiguring = true
	}
	s.notify()
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return unlock, nil
}

// Reconfiguring reports whether GPU i is being reconfigured now.
func (l *Locks) Reconfiguring(gpuIndex int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(gpuIndex).reconfiguring
}
