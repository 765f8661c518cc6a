package plugin

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestOnUnpreparedAfterStaleDropHoldsNoLock: when a prepare drops a claim's
// stale preparation, the agent hears of it with no lock of the plugin held
// (it may ask PreparedDevices at once), and by then the stale devices are
// no longer prepared.
func TestOnUnpreparedAfterStaleDropHoldsNoLock(t *testing.T) {
	e := newEnv(t)
	var p *Plugin
	var calls int
	var lockFree bool
	var err error
	p, err = New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, OnUnprepared: func() {
			calls++
			if lockFree = p.mu.TryLock(); lockFree {
				p.mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	driver := slices.DefaultDriverName
	const old = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, old})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if calls != 1 || !lockFree {
		t.Errorf("OnUnprepared called %d times, plugin unlocked at the call: %t; want once, unlocked", calls, lockFree)
	}
	if _, ok := p.PreparedDevices()[old]; ok {
		t.Errorf("%s still prepared after the stale preparation was dropped", old)
	}
}
