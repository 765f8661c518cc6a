package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/plugin"
)

// simulatedCapabilities stands in, on a simulated node, for what the NVIDIA
// driver does on a real one: it writes the
// <host root>/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<id>[/ci<id>]/access
// files of every MIG device it lists, which the kubelet plugin reads to find
// the /dev/nvidia-caps nodes of a device it prepares.
type simulatedCapabilities struct {
	gpu.Manager
	hostRoot string

	mu     sync.Mutex
	minors map[int]int // GPU index -> device minor
}

// MIGDevices lists the devices and makes sure their capability files exist.
func (s *simulatedCapabilities) MIGDevices(ctx context.Context, gpuIndex int) ([]gpu.MIGDevice, error) {
	devs, err := s.Manager.MIGDevices(ctx, gpuIndex)
	if err != nil {
		return nil, err
	}
	minor, err := s.minor(ctx, gpuIndex)
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.CIID < 0 {
			continue
		}
		if err := plugin.WriteFakeCapabilities(s.hostRoot, minor, d); err != nil {
			return nil, fmt.Errorf("writing simulated capabilities of %s on GPU %d: %w", d.Device(), gpuIndex, err)
		}
	}
	return devs, nil
}

func (s *simulatedCapabilities) minor(ctx context.Context, gpuIndex int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.minors[gpuIndex]; ok {
		return m, nil
	}
	gpus, err := s.Manager.GPUs(ctx)
	perGPU, ok := gpu.GPUErrors(err)
	if !ok {
		return 0, err
	}
	if err := perGPU[gpuIndex]; err != nil {
		return 0, fmt.Errorf("reading GPU %d: %w", gpuIndex, err)
	}
	// GPUs that cannot be read are left out, read again next time.
	s.minors = map[int]int{}
	for _, g := range gpus {
		s.minors[g.Index] = g.Minor
	}
	m, ok := s.minors[gpuIndex]
	if !ok {
		return 0, fmt.Errorf("no GPU with index %d: %w", gpuIndex, gpu.ErrNotFound)
	}
	return m, nil
}
