package plugin

import (
	"context"
	"testing"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// probingLocks is a gpu.Manager that, at each GPUs call, records whether
// the lock of GPU gpuIndex could be taken then (it is released at once).
type probingLocks struct {
	gpu.Manager
	locks    *gpulock.Locks
	gpuIndex int
	free     []bool
}

func (h *probingLocks) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	unlock, ok := h.locks.TryLock(h.gpuIndex)
	if ok {
		unlock()
	}
	h.free = append(h.free, ok)
	return h.Manager.GPUs(ctx)
}

// TestPrepareHoldsTheGPULockWhileItReadsNVML: a prepare reads its devices
// from NVML under the lock of their GPU, so the repartitioner cannot
// destroy a device between the check that it exists and the record that it
// is prepared; once the prepare returns, the lock is free again.
func TestPrepareHoldsTheGPULockWhileItReadsNVML(t *testing.T) {
	e := newEnv(t)
	h := &probingLocks{Manager: e.gpus, locks: e.locks, gpuIndex: 0}
	p, err := New(Config{NodeName: node, GPUs: h, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(h.free) == 0 {
		t.Fatal("the prepare did not read NVML")
	}
	for i, free := range h.free {
		if free {
			t.Errorf("GPU 0's lock was free at NVML read %d of the prepare, want held by the prepare", i+1)
		}
	}
	unlock, ok := e.locks.TryLock(0)
	if !ok {
		t.Fatal("GPU 0's lock is still held after the prepare returned")
	}
	unlock()
}
