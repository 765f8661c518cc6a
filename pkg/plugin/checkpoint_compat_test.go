package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareFromCheckpointBeforeGPUUUID: a checkpoint whose MIG device
// records carry no gpuUUID (written before the field) still answers the
// kubelet's repeated prepare with the devices prepared then.
func TestPrepareFromCheckpointBeforeGPUUUID(t *testing.T) {
	e := newEnv(t)
	c := mixedClaim(slices.DefaultDriverName)
	first := e.prepare(e.plugin(""), c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	old := mustRead(t, filepath.Join("testdata", "checkpoint-before-gpuuuid.json"))
	if strings.Contains(string(old), "gpuUUID") {
		t.Fatal("fixture has gpuUUID")
	}
	if err := os.WriteFile(filepath.Join(e.cpDir, CheckpointFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.prepare(e.plugin(""), c)
	if r.Err != nil {
		t.Fatalf("prepare from a checkpoint without gpuUUID: %v", r.Err)
	}
	if diff := cmp.Diff(first.Devices, r.Devices); diff != "" {
		t.Errorf("prepared devices (-first +now):\n%s", diff)
	}
}
