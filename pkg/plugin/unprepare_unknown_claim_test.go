package plugin

import (
	"path/filepath"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestUnprepareOfAnUnknownClaimDoesNotWriteTheCheckpoint: unpreparing a
// claim the plugin never prepared is no error and leaves the checkpoint
// alone, even where the checkpoint could not be written (a full or
// read-only disk): the kubelet's unprepare of it does not fail and retry.
func TestUnprepareOfAnUnknownClaimDoesNotWriteTheCheckpoint(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const dev = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The checkpoint's path becomes a directory that is not empty: a write
	// of it fails.
	blockFile(t, filepath.Join(e.cpDir, CheckpointFile))
	if err := e.unprepare(p, claim(uid2, "never-prepared", alloc{"mig", slices.DefaultDriverName, node, "gpu-1"})); err != nil {
		t.Errorf("unprepare of a claim never prepared: %v, want no error", err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("PreparedDevices = %v, want %s still prepared", p.PreparedDevices(), dev)
	}
}
