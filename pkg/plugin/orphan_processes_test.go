package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// processListing is a gpu.Manager that counts its process listings and,
// with fail set, fails them.
type processListing struct {
	gpu.Manager
	fail               error
	migCalls, gpuCalls int
}

func (m *processListing) MIGProcesses(ctx context.Context, idx int) (map[mig.Device][]gpu.Process, error) {
	m.migCalls++
	if m.fail != nil {
		return nil, m.fail
	}
	return m.Manager.MIGProcesses(ctx, idx)
}

func (m *processListing) GPUProcesses(ctx context.Context, idx int) ([]gpu.Process, error) {
	m.gpuCalls++
	if m.fail != nil {
		return nil, m.fail
	}
	return m.Manager.GPUProcesses(ctx, idx)
}

// TestReleaseOrphanWhenProcessesCannotBeListed: where NVML cannot list the
// processes on a device of the claim (a MIG device's or a whole GPU's),
// ReleaseOrphan fails with that error and the claim stays prepared: a
// process of it may still run there.
func TestReleaseOrphanWhenProcessesCannotBeListed(t *testing.T) {
	for name, device := range map[string]string{
		"a MIG device": "gpu-0-mig-3g40gb-9-4",
		"a whole GPU":  "gpu-1",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			nvmlErr := errors.New("listing processes: ERROR_UNKNOWN")
			m := &processListing{Manager: e.gpus}
			p, err := New(Config{NodeName: node, GPUs: m, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
			if err != nil {
				t.Fatal(err)
			}
			if r := e.prepare(p, claim(uid1, "train", alloc{"dev", slices.DefaultDriverName, node, device})); r.Err != nil {
				t.Fatal(r.Err)
			}
			m.fail = nvmlErr
			if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); released || !errors.Is(err, nvmlErr) {
				t.Errorf("ReleaseOrphan with the processes unlistable: released %v, %v; want not released, %v", released, err, nvmlErr)
			}
			if _, ok := p.PreparedDevices()[device]; !ok {
				t.Errorf("%s is no longer prepared", device)
			}
		})
	}
}

// TestReleaseOrphanListsEachGPUsMIGProcessesOnce: the processes of a
// claim's MIG devices on one GPU are read with one NVML listing of that
// GPU, however many of its devices the claim holds.
func TestReleaseOrphanListsEachGPUsMIGProcessesOnce(t *testing.T) {
	e := newEnv(t)
	m := &processListing{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: m, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train",
		alloc{"a", driver, node, "gpu-0-mig-2g20gb-14-0"},
		alloc{"b", driver, node, "gpu-0-mig-1g10gb-19-2"},
		alloc{"c", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	m.migCalls = 0
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Fatalf("ReleaseOrphan: released %v, %v; want released", released, err)
	}
	if m.migCalls != 1 {
		t.Errorf("MIG processes of GPU 0 listed %d times for three of its devices, want once", m.migCalls)
	}
}
