package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareWhoseCheckpointCannotBeWrittenLeavesNoSpec: the first prepare
// of a claim whose checkpoint write fails returns the error and leaves
// neither a record nor the CDI spec it wrote before the checkpoint: no
// spec names devices the checkpoint does not protect.
func TestPrepareWhoseCheckpointCannotBeWrittenLeavesNoSpec(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// The checkpoint's path is a directory that is not empty: the rename
	// that replaces the file fails.
	blockFile(t, filepath.Join(e.cpDir, CheckpointFile))
	r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}))
	if r.Err == nil {
		t.Fatal("prepare succeeded with the checkpoint unwritable, want an error")
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("PreparedDevices = %v after the failed prepare, want none", got)
	}
	specPath := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	if _, err := os.Stat(specPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec %s after the failed prepare: %v, want it removed", specPath, err)
	}
}
