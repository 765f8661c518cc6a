package plugin

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestNewWithoutLocksPrepares: a plugin configured without Locks gets a
// private set of GPU locks, and prepares and unprepares claims with it.
func TestNewWithoutLocksPrepares(t *testing.T) {
	e := newEnv(t)
	p, err := New(Config{NodeName: node, GPUs: e.gpus, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}, alloc{"whole", slices.DefaultDriverName, node, "gpu-1"})
	if r := e.prepare(p, c); r.Err != nil || len(r.Devices) != 2 {
		t.Fatalf("prepare without Locks configured: %v, %d devices; want no error and 2 devices", r.Err, len(r.Devices))
	}
	if err := e.unprepare(p, c); err != nil {
		t.Errorf("unprepare without Locks configured: %v, want no error", err)
	}
}
