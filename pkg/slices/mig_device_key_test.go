package slices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseMIGDeviceName: a name MIGDeviceName makes parses to the key of
// its GPU, profile and start, whatever its GI profile ID; a name of any
// other form (a part missing or added, a number signed, padded or
// negative) parses to none.
func TestParseMIGDeviceName(t *testing.T) {
	type parsed struct {
		Key MIGDeviceKey
		OK  bool
	}
	for name, want := range map[string]parsed{
		MIGDeviceName(3, "1g.10gb+me", 21, 6): {MIGDeviceKeyOf(3, "1g.10gb+me", 6), true},
		MIGDeviceName(12, "7G.80GB", 0, 0):    {MIGDeviceKey{GPUIndex: 12, ProfileToken: "7g80gb", Start: 0}, true},
		"gpu-3-mig-1g10gbme-21":               {},
		"gpu-3-mig-1g10gbme-21-6-1":           {},
		"gpu-3-mig-1g10gbme--1-6":             {},
		"gpu-03-mig-1g10gbme-21-6":            {},
		"gpu-3-mig-1g10gbme-21-+6":            {},
		"gpu-3-mps-1g10gbme-21-6":             {},
		"tpu-3-mig-1g10gbme-21-6":             {},
		GPUDeviceName(3):                      {},
	} {
		k, ok := ParseMIGDeviceName(name)
		if diff := cmp.Diff(want, parsed{k, ok}); diff != "" {
			t.Errorf("ParseMIGDeviceName(%q) (-want +got):\n%s", name, diff)
		}
	}
}
