package plugin

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestUnprepareKeepsTheClaimWhenItsSpecCannotBeRemoved: an unprepare whose
// CDI spec cannot be removed fails for that claim and keeps its checkpoint
// entry: its devices stay protected while a spec naming them is there, and
// the agent is not told devices were released. The kubelet retries.
func TestUnprepareKeepsTheClaimWhenItsSpecCannotBeRemoved(t *testing.T) {
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	const dev = "gpu-0-mig-3g40gb-9-4"
	c := claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, dev})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The spec's path becomes a directory that is not empty: removing it
	// fails.
	blockFile(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
	if err := e.unprepare(p, c); err == nil || !strings.Contains(err.Error(), "removing CDI spec") {
		t.Errorf("unprepare with the spec not removable: %v, want an error about removing the CDI spec", err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("PreparedDevices = %v after the failed unprepare, want %s still prepared", p.PreparedDevices(), dev)
	}
	if cp, err := readCheckpoint(filepath.Join(e.cpDir, CheckpointFile)); err != nil || len(cp) != 1 {
		t.Errorf("checkpoint after the failed unprepare: %v, %v; want the claim still in it", cp, err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times after a failed unprepare, want 0", calls)
	}
}
