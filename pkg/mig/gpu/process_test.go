package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// TestProcessMemory: a process's used memory is NVML's bytes in MiB, and
// unknown (-1) where NVML reports NVML_VALUE_NOT_AVAILABLE (all bits set)
// rather than some 17 million TiB.
func TestProcessMemory(t *testing.T) {
	tests := map[string]struct {
		in   nvml.ProcessInfo
		want Process
	}{
		"bytes":         {nvml.ProcessInfo{Pid: 7, UsedGpuMemory: 3 << 30}, Process{PID: 7, UsedMemoryMiB: 3072}},
		"none":          {nvml.ProcessInfo{Pid: 8}, Process{PID: 8}},
		"not available": {nvml.ProcessInfo{Pid: 9, UsedGpuMemory: ^uint64(0)}, Process{PID: 9, UsedMemoryMiB: -1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, process(tc.in)); diff != "" {
				t.Errorf("process (-want +got):\n%s", diff)
			}
		})
	}
}
