package gpu_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestProfileTableReadBeforeKeepingWins: a table this process read from
// NVML already is not replaced by the file's when KeepProfileTables comes
// after the first listing: the file holds an earlier read, NVML's own
// answer is newer.
func TestProfileTableReadBeforeKeepingWins(t *testing.T) {
	sim := rightHalfSim(t)
	path := filepath.Join(t.TempDir(), "nvml-profiles.json")
	readTableOnce(t, sim, path)
	saved := []mig.Placement{{Start: 0, Size: 4}}
	editTables(func(f map[string]any) {
		g := f["gpus"].([]any)[0].(map[string]any)
		g["placements"] = map[string]any{"3g.40gb": saved}
	})(t, path)

	m := managerOver(t, sim, nil, "")
	if got := nvmlPlacements(t, m); !cmp.Equal(got, rightHalf3g) {
		t.Fatalf("MIG off, first listing: 3g.40gb placements %v, want NVML's %v", got, rightHalf3g)
	}
	m.KeepProfileTables(t.Context(), path)
	if got := nvmlPlacements(t, m); !cmp.Equal(got, rightHalf3g) {
		t.Errorf("after KeepProfileTables: 3g.40gb placements %v, want NVML's %v read before, not the file's %v", got, rightHalf3g, saved)
	}
}
