package gpu

import (
	"context"
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestCancelledContextTouchesNoNVML: every call made with a context that is
// done fails with the context's error before any NVML call (the mock
// panics on any method but Init), so that a caller that gave up never
// changes a GPU.
func TestCancelledContextTouchesNoNVML(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.SUCCESS }}
	m, err := NewNVML(lib, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d := mig.Device{Profile: "1g.10gb", Start: 0}
	calls := map[string]func() error{
		"GPUs":             func() error { _, err := m.GPUs(ctx); return err },
		"MIGDevices":       func() error { _, err := m.MIGDevices(ctx, 0); return err },
		"CreateMIGDevice":  func() error { _, err := m.CreateMIGDevice(ctx, 0, d); return err },
		"DestroyMIGDevice": func() error { return m.DestroyMIGDevice(ctx, 0, d) },
		"SetMIGMode":       func() error { _, err := m.SetMIGMode(ctx, 0, true); return err },
		"Processes":        func() error { _, err := m.Processes(ctx, 0, d); return err },
		"MIGProcesses":     func() error { _, err := m.MIGProcesses(ctx, 0); return err },
		"GPUProcesses":     func() error { _, err := m.GPUProcesses(ctx, 0); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s with a cancelled context made an NVML call: %v", name, r)
					}
				}()
				err = call()
			}()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context = %v; want an error wrapping %v", name, err, context.Canceled)
			}
		})
	}
}
