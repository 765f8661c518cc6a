package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareListsMIGDevicesOnlyOnItsGPUs: a prepare lists the MIG devices
// of the GPUs its claim's devices lie on, and of no other GPU in MIG mode
// (whose lock it does not hold: the repartitioner may be changing its
// layout meanwhile).
func TestPrepareListsMIGDevicesOnlyOnItsGPUs(t *testing.T) {
	tests := map[string]struct {
		device string
		want   map[int]int
	}{
		"a whole GPU beside a GPU in MIG mode": {"gpu-1", nil},
		"a MIG device":                         {"gpu-0-mig-3g40gb-9-4", map[int]int{0: 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			counting := &countingGPUs{Manager: e.gpus}
			p, err := New(Config{NodeName: node, GPUs: counting, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
			if err != nil {
				t.Fatal(err)
			}
			if r := e.prepare(p, claim(uid1, "train", alloc{"dev", slices.DefaultDriverName, node, tc.device})); r.Err != nil {
				t.Fatal(r.Err)
			}
			if diff := cmp.Diff(tc.want, counting.migs); diff != "" {
				t.Errorf("MIG device listings by GPU (-want +got):\n%s", diff)
			}
		})
	}
}
