package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestDerivedProfileNameFallback: a GI profile go-nvlib cannot name (no
// compute-instance profile spans its slice count, or the GPU's memory is
// not known) is named "<slices>g.<GB>gb", its memory rounded to the
// nearest GB, with nvidia-smi's suffix for its index.
func TestDerivedProfileNameFallback(t *testing.T) {
	total := uint64(81920) << 20
	tests := []struct {
		idx   int
		info  nvml.GpuInstanceProfileInfo
		total uint64
		want  string
	}{
		// 51900 MiB is 50.7 GB: rounded up.
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 5, MemorySizeMB: 51900}, total, "5g.51gb"},
		// 50700 MiB is 49.5 GB: rounded up.
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 5, MemorySizeMB: 50700}, total, "5g.50gb"},
		// 10400 MiB is 10.2 GB: rounded down.
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 5, MemorySizeMB: 10400}, total, "5g.10gb"},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GpuInstanceProfileInfo{SliceCount: 5, MemorySizeMB: 51900}, total, "5g.51gb+gfx"},
		// The GPU's memory unknown: the GI's own, 9728 MiB (9.5 GB).
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9728}, 0, "1g.10gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 19968}, 0, "1g.20gb"},
	}
	for _, tc := range tests {
		if got := derivedProfileName(tc.idx, tc.info, tc.total); got != tc.want {
			t.Errorf("derivedProfileName(%d, %+v, %d) = %q, want %q", tc.idx, tc.info, tc.total, got, tc.want)
		}
	}
}
