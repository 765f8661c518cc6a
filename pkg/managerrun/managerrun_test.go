package managerrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type starter func(ctx context.Context) error

func (s starter) Start(ctx context.Context) error { return s(ctx) }

// TestStart: a manager that stops returns its error; one that does not stop
// once its context ends (caches never synced) is left after stopWithin.
func TestStart(t *testing.T) {
	stuck := errors.New("stuck")
	tests := map[string]struct {
		mgr        starter
		stopWithin time.Duration
		want       string
	}{
		"stops with its context": {func(ctx context.Context) error { <-ctx.Done(); return nil }, time.Minute, ""},
		"fails on its own":       {func(context.Context) error { return stuck }, time.Minute, "stuck"},
		"never stops": {func(context.Context) error {
			select {} // as runnableGroup.Start waiting for a cache
		}, 10 * time.Millisecond, "not stopped 10ms after the stop signal"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := Start(ctx, tc.mgr, tc.stopWithin)
			if errors.Is(err, ErrNotStopped) != (name == "never stops") {
				t.Errorf("Start: %v; ErrNotStopped only for the manager that never stops", err)
			}
			if got := ""; err != nil {
				got = err.Error()
				if tc.want == "" || !strings.Contains(got, tc.want) {
					t.Errorf("Start: %v, want %q", err, tc.want)
				}
			} else if tc.want != "" {
				t.Errorf("Start: nil, want %q", tc.want)
			}
		})
	}
}

func TestValidateBindAddress(t *testing.T) {
	tests := map[string]bool{
		"0": true, ":8080": true, "127.0.0.1:8080": true, "[::1]:8080": true,
		":http": true, "bogus": false, "8080": false, ":no-such-service": false, ":70000": false, "": false,
		":": false, "localhost:": false, ":0": false, "[::1]:0": false, "127.0.0.1:0": false,
	}
	for addr, ok := range tests {
		err := ValidateBindAddress("metrics-bind-address", addr)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok %t", addr, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--metrics-bind-address") {
			t.Errorf("%q: %v does not name the flag", addr, err)
		}
	}
}

// TestValidateNamespace: a namespace flag takes empty (its default) or a
// name the API server would take for a namespace, and the error names the
// flag.
func TestValidateNamespace(t *testing.T) {
	tests := map[string]bool{
		"": true, "miglayout-system": true, "kube-system": true,
		"Miglayout": false, "miglayout.system": false, "-x": false, strings.Repeat("a", 64): false, " ": false,
	}
	for ns, ok := range tests {
		err := ValidateNamespace("lease-namespace", ns)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok %t", ns, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--lease-namespace") {
			t.Errorf("%q: %v does not name the flag", ns, err)
		}
	}
}

// TestNoArgs: a command line with no argument left after its flags passes;
// one with some is refused, naming them and the "=" form of a boolean flag;
// so is one with a single argument left, the usual mistake of a boolean flag
// written "--metrics-secure false" last.
func TestNoArgs(t *testing.T) {
	if err := NoArgs(nil); err != nil {
		t.Errorf("NoArgs(nil): %v", err)
	}
	if err := NoArgs([]string{"false"}); err == nil || !strings.Contains(err.Error(), `"false"`) {
		t.Errorf("NoArgs([false]): %v, want the argument refused by name", err)
	}
	err := NoArgs([]string{"false", "--agent-lease-namespace=miglayout"})
	if err == nil || !strings.Contains(err.Error(), `"false"`) || !strings.Contains(err.Error(), "--flag=false") {
		t.Errorf("NoArgs: %v, want the arguments named and --flag=false suggested", err)
	}
}
