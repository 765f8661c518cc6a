package mig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMediaEngineTotals: a GPU's NVJPG and OFA engines are its full-size
// profile's (NVIDIA Multi-Instance GPU User Guide, "Supported MIG
// Profiles"): one of each on an A100 and an A30, seven NVJPG and one OFA on
// an H100.
func TestMediaEngineTotals(t *testing.T) {
	for name, want := range map[string][2]int{
		"A100-SXM4-80GB": {1, 1},
		"A30-24GB":       {1, 1},
		"H100-SXM5-80GB": {7, 1},
	} {
		jpeg, ofa := mustModel(t, name).MediaEngineTotals()
		if diff := cmp.Diff(want, [2]int{jpeg, ofa}); diff != "" {
			t.Errorf("%s: NVJPG and OFA engines (-want +got):\n%s", name, diff)
		}
	}
}
