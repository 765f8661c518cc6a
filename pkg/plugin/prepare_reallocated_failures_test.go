package plugin

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareReallocatedWhileProcessesCannotBeListed: a claim prepared on a
// device and allocated another one is not prepared afresh while NVML cannot
// list the processes on the device it was prepared with (a container
// started under the old allocation may still run there): the prepare fails
// with NVML's error and the old preparation stays, its device protected.
func TestPrepareReallocatedWhileProcessesCannotBeListed(t *testing.T) {
	e := newEnv(t)
	nvmlErr := errors.New("listing processes: ERROR_UNKNOWN")
	m := &processListing{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: m, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	driver := slices.DefaultDriverName
	const old = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, old})); r.Err != nil {
		t.Fatal(r.Err)
	}
	m.fail = nvmlErr
	r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"}))
	if !errors.Is(r.Err, nvmlErr) {
		t.Fatalf("prepare of the reallocated claim with the old device's processes unlistable: %v, want %v", r.Err, nvmlErr)
	}
	got := p.PreparedDevices()
	if _, ok := got[old]; !ok {
		t.Errorf("PreparedDevices = %v after the failed prepare, want %s still prepared", got, old)
	}
	if _, ok := got["gpu-1"]; ok {
		t.Errorf("PreparedDevices = %v after the failed prepare, want gpu-1 not prepared", got)
	}
}

// TestPrepareReallocatedWhenTheStalePreparationCannotBeDropped: a claim
// allocated other devices than it was prepared with, whose old preparation
// cannot be dropped (the checkpoint cannot be written), fails saying so,
// keeps its old preparation, and does not tell the agent devices were
// released (none was).
func TestPrepareReallocatedWhenTheStalePreparationCannotBeDropped(t *testing.T) {
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	driver := slices.DefaultDriverName
	const old = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, old})); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The checkpoint's path becomes a directory that is not empty: the
	// rename that replaces the file fails.
	blockFile(t, filepath.Join(e.cpDir, CheckpointFile))
	r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"}))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "dropping its stale preparation") {
		t.Fatalf("prepare of the reallocated claim with the checkpoint unwritable: %v, want an error about dropping its stale preparation", r.Err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times, want 0: the old preparation was not dropped", calls)
	}
	if got := p.PreparedDevices(); len(got) != 1 || got[old] == nil {
		t.Errorf("PreparedDevices = %v after the failed prepare, want %s alone", got, old)
	}
}
