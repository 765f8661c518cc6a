// Package managerrun runs the controller-runtime manager of miglayout's
// binaries and checks the settings it would only refuse once started.
package managerrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// StopWithin is how long Start waits for a manager to stop once its context
// ends: controller-runtime's default graceful shutdown (30 s) and 5 s more.
const StopWithin = 35 * time.Second

// Starter is what Start runs: a manager.Manager.
type Starter interface {
	Start(ctx context.Context) error
}

// ErrNotStopped is Start's error where the manager had not stopped
// stopWithin after its context ended, or stopped only by giving up on its
// runnables when its graceful shutdown ran out: its runnables may still run
// (a reconcile inside a call that hangs), so the caller should exit without
// closing what they use.
var ErrNotStopped = errors.New("not stopped")

// Start runs mgr until ctx ends and returns its error, or, where mgr has
// not returned stopWithin after ctx ended, an error saying so. The
// controller-runtime this project pins (v0.25) does not return while an
// informer cache has not synced for the first time (a list RBAC refuses, an
// API server gone during the first list), even once its context has ended
// (kubernetes-sigs/controller-runtime#3440): the process would ignore
// SIGTERM, spinning a CPU core, until the kubelet kills it.
func Start(ctx context.Context, mgr Starter, stopWithin time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	timer := time.NewTimer(stopWithin)
	defer timer.Stop()
	select {
	case err := <-done:
		// The manager's own graceful shutdown ran out (its error wraps
		// context.DeadlineExceeded, which ctx's end is not): a runnable
		// it gave up on may still run, inside a call that hangs.
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return fmt.Errorf("stopping the manager: %w: %w", ErrNotStopped, err)
		}
		return err
	case <-timer.C:
		return fmt.Errorf("stopping the manager: %w %s after the stop signal (an informer cache that never synced: look for list errors above, such as a forbidden list)", ErrNotStopped, stopWithin)
	}
}

// NoArgs refuses the arguments a command line left after its flags (flag
// set's Args): the binaries take none, and one there is most often the value
// of a boolean flag written "--flag false" (a boolean flag takes no separate
// value, so the flag is set true and "false" left over; Go's flag package
// then also stops parsing, dropping every flag after it).
func NoArgs(args []string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("unexpected arguments %q: every setting is a flag, and a boolean flag takes its value after \"=\" (--flag=false)", args)
}

// ValidateBindAddress checks the value of a bind-address flag as the manager
// listens on it once started: "0" (off), or host:port with a port from 1 to
// 65535 or a service name (":8080", "127.0.0.1:8080", ":http"). An empty
// port or port 0 (":", "localhost:", ":0") is refused: it would listen on
// a random port no probe or scrape finds. The host is not resolved: a host the machine does
// not have fails only when the manager listens. The error names the flag.
func ValidateBindAddress(flag, addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil && port == "" {
		err = errors.New("no port")
	}
	if err == nil {
		// A number from 1 to 65535, or a service name ("http").
		var p int
		if p, err = net.LookupPort("tcp", port); err == nil && p == 0 {
			err = errors.New("port 0 listens on a random port")
		}
	}
	if err != nil {
		return fmt.Errorf("--%s=%q: want host:port (such as :8080) or 0 to turn it off: %w", flag, addr, err)
	}
	return nil
}

// ValidateNamespace checks the value of a namespace flag: empty (the flag's
// default) or a DNS-1123 label, as the API server wants a namespace name. A
// name it would refuse must not quietly turn off what the flag turns on (an
// agent's heartbeat, the controller's check of it). The error names the flag.
func ValidateNamespace(flag, ns string) error {
	if ns == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("--%s=%q: not a namespace name: %s", flag, ns, strings.Join(errs, "; "))
	}
	return nil
}
