package plugin

import (
	"path/filepath"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareFailsWhenItsSpecCannotBeWritten: a prepare whose CDI spec
// cannot be written fails, and records nothing: the kubelet must not be
// handed CDI device IDs the container runtime cannot resolve, and the
// claim's devices are not recorded as prepared.
func TestPrepareFailsWhenItsSpecCannotBeWritten(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// The spec's path is a directory that is not empty: the rename that
	// puts the spec in place fails.
	blockFile(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
	r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}))
	if r.Err == nil {
		t.Fatalf("prepare with the CDI spec not writable returned devices %+v, want an error", r.Devices)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("PreparedDevices = %v after the failed prepare, want none", got)
	}
	if cp, err := readCheckpoint(filepath.Join(e.cpDir, CheckpointFile)); err != nil || len(cp) != 0 {
		t.Errorf("checkpoint after the failed prepare: %v, %v; want it empty", cp, err)
	}
}
