// Package gputest gives tests a GPU manager over the NVML simulator.
package gputest

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// Simulated returns a simulator of cfg and the GPU manager over it, with
// the default catalog (mig.DefaultCatalog); the manager is shut down when
// the test ends, and a shutdown that fails fails the test. A configuration
// the simulator refuses fails the test.
func Simulated(t testing.TB, cfg nvmlsim.Config) (*nvmlsim.Sim, *gpu.NVMLManager) {
	t.Helper()
	sim, err := nvmlsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewNVML(sim, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("shutting down the GPU manager: %v", err)
		}
	})
	return sim, m
}
