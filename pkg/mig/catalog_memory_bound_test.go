package mig

import (
	"slices"
	"testing"
)

// TestDerivedMemoryIsALowerBound: on the Blackwell models, whose 3g, 4g
// and 7g memory no source gives (memoryMiB in Unverified) and is derived
// (blackwell.yaml), a profile claims no more than the same memory slices
// of the largest profile whose memory a source gives and whose slices
// divide its own, times the ratio. A planned device must never claim more
// memory than NVML will make (a selector on memory would accept a planned
// device kube-scheduler then refuses). Elsewhere values marked unverified
// come from published outputs, not derived, and may be above such a
// product (H100's 2g.20gb, 20096 MiB, against twice 1g.10gb's 9984).
func TestDerivedMemoryIsALowerBound(t *testing.T) {
	for _, m := range DefaultCatalog().Models() {
		if m.Architecture != "Blackwell" {
			continue
		}
		for _, p := range m.Profiles {
			if !slices.Contains(p.Unverified, "memoryMiB") || p.MemorySlices < 2 {
				continue
			}
			var base *Profile
			for i := range m.Profiles {
				q := &m.Profiles[i]
				if slices.Contains(q.Unverified, "memoryMiB") || q.MemorySlices >= p.MemorySlices || p.MemorySlices%q.MemorySlices != 0 {
					continue
				}
				if base == nil || q.MemorySlices > base.MemorySlices || q.MemorySlices == base.MemorySlices && q.MemoryMiB < base.MemoryMiB {
					base = q
				}
			}
			if base == nil {
				continue
			}
			if bound := base.MemoryMiB * int64(p.MemorySlices/base.MemorySlices); p.MemoryMiB > bound {
				t.Errorf("%s %s: %d MiB, unverified, above %d × %s's %d MiB = %d", m.Name, p.Name, p.MemoryMiB, p.MemorySlices/base.MemorySlices, base.Name, base.MemoryMiB, bound)
			}
		}
	}
}
