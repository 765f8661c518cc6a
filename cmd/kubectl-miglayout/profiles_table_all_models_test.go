package main

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestProfilesTableAllModels: the table of every model gives each its own
// block, the blocks one blank line apart, in the catalog's order.
func TestProfilesTableAllModels(t *testing.T) {
	out, err := run(t, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(out, "\n\n* unverified")
	blocks := strings.Split(strings.TrimSuffix(body, "\n"), "\n\n")
	models := mig.DefaultCatalog().Models()
	if len(blocks) != len(models) {
		t.Fatalf("%d blocks, want one per model (%d):\n%s", len(blocks), len(models), out)
	}
	for i, m := range models {
		if !strings.HasPrefix(blocks[i], m.Name+" ("+m.ProductName+", ") || !strings.Contains(blocks[i], "\n  PROFILE ") {
			t.Errorf("block %d does not start with model %s and its header:\n%s", i, m.Name, blocks[i])
		}
	}
}
