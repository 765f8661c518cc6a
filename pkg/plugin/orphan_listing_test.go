package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// failingListingOnce is a gpu.Manager whose next GPU listing, once armed,
// fails as a whole (NVML could not count the GPUs); the ones after succeed.
type failingListingOnce struct {
	gpu.Manager
	armed bool
}

func (m *failingListingOnce) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	if m.armed {
		m.armed = false
		return nil, errors.New("counting GPUs: ERROR_UNKNOWN")
	}
	return m.Manager.GPUs(ctx)
}

// TestReleaseOrphanWhenTheGPUListingFails: where NVML cannot list the GPUs
// at all while ReleaseOrphan looks for the lost ones, no device of the
// claim is taken for one on a lost GPU: the processes of all of them are
// still looked for, and a process running on one keeps the claim prepared.
func TestReleaseOrphanWhenTheGPUListingFails(t *testing.T) {
	e := newEnv(t)
	m := &failingListingOnce{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: m, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	const dev = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := e.sim.StartProcess(p.claims[uid1].Devices[0].UUID, 1024); err != nil {
		t.Fatal(err)
	}
	m.armed = true
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); released || err == nil {
		t.Errorf("ReleaseOrphan with a process running and the GPU listing failing once: released %v, %v; want not released, with an error", released, err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("%s is no longer prepared while a process runs on it", dev)
	}
}
