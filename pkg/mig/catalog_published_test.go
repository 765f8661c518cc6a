package mig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lgipRow is one row of `nvidia-smi mig -lgip` as printed: GI profile ID,
// instance count, memory in GiB (two decimals), SMs, NVDEC, NVENC, copy
// engines, NVJPG and OFA.
type lgipRow struct {
	ID, Instances               int
	GiB                         float64
	SM, Dec, Enc, CE, JPEG, OFA int
}

// TestCatalogMatchesPublishedLGIP compares the catalog with rows of
// published `nvidia-smi mig -lgip` outputs, typed here from the
// transcripts the model files cite (not read from the catalog): every
// value of a row, memory within the rounding of two decimals of a GiB.
func TestCatalogMatchesPublishedLGIP(t *testing.T) {
	for model, rows := range map[string]map[string]lgipRow{
		// [lgip-gh200]: a GH200 node with 480 GB of CPU memory.
		"GH200-96GB": {
			"1g.12gb":    {19, 7, 11.00, 16, 1, 0, 1, 1, 0},
			"1g.12gb+me": {20, 1, 11.00, 16, 1, 0, 1, 1, 1},
			"1g.24gb":    {15, 4, 23.00, 26, 1, 0, 1, 1, 0},
			"2g.24gb":    {14, 3, 23.00, 32, 2, 0, 2, 2, 0},
			"3g.48gb":    {9, 2, 46.50, 60, 3, 0, 3, 3, 0},
			"4g.48gb":    {5, 1, 46.50, 64, 4, 0, 4, 4, 0},
			"7g.96gb":    {0, 1, 93.00, 132, 7, 0, 8, 7, 1},
		},
		// [lgip-gh200-144]: NVIDIA/mig-parted PR #139, the rows it shows.
		"GH200-144GB": {
			"1g.18gb":    {19, 7, 17.50, 16, 1, 0, 1, 1, 0},
			"1g.18gb+me": {20, 1, 17.50, 16, 1, 0, 1, 1, 1},
			"1g.36gb":    {15, 4, 35.25, 26, 1, 0, 1, 1, 0},
			"2g.36gb":    {14, 3, 35.25, 32, 2, 0, 2, 2, 0},
		},
		// [gb200]: NVIDIA/mig-parted issue #227 (production boards);
		// 2g.47gb's engines from NVIDIA/gpu-operator PR #1303.
		"GB200-186GB": {
			"1g.23gb":    {19, 7, 22.00, 18, 1, 0, 2, 1, 0},
			"1g.23gb+me": {20, 1, 22.00, 18, 1, 0, 2, 1, 1},
			"1g.47gb":    {15, 4, 45.50, 32, 1, 0, 2, 1, 0},
			"2g.47gb":    {14, 3, 45.50, 38, 2, 0, 4, 2, 0},
		},
		// [lgip-a30]: driver 535.183.01.
		"A30-24GB": {
			"1g.6gb":     {14, 4, 5.81, 14, 1, 0, 1, 0, 0},
			"1g.6gb+me":  {21, 1, 5.81, 14, 1, 0, 1, 1, 1},
			"2g.12gb":    {5, 2, 11.69, 28, 2, 0, 2, 0, 0},
			"2g.12gb+me": {6, 1, 11.69, 28, 2, 0, 2, 1, 1},
			"4g.24gb":    {0, 1, 23.44, 56, 4, 0, 4, 1, 1},
		},
	} {
		m := mustModel(t, model)
		for name, want := range rows {
			p, err := m.Profile(name)
			if err != nil {
				t.Errorf("%s: %v", model, err)
				continue
			}
			got := lgipRow{p.ID, p.MaxCount, want.GiB, p.Multiprocessors, p.Decoders, p.Encoders, p.CopyEngines, p.JPEGEngines, p.OFAEngines}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s (-published +catalog):\n%s", model, name, diff)
			}
			// -lgip rounds to 0.01 GiB: within about 6 MiB.
			if d := float64(p.MemoryMiB) - want.GiB*1024; d < -6 || d > 6 {
				t.Errorf("%s %s: memoryMiB %d, nvidia-smi shows %.2f GiB (%.0f MiB)", model, name, p.MemoryMiB, want.GiB, want.GiB*1024)
			}
		}
	}
}
