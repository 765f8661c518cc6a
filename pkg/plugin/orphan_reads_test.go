package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReleaseOrphanListsMIGDevicesOnce: the processes of a claim with two
// MIG devices on GPU 0 are found with one listing of the GPU's MIG devices
// (running reads each board once), not one listing per device.
func TestReleaseOrphanListsMIGDevicesOnce(t *testing.T) {
	e := newEnv(t)
	counting := &countingGPUs{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: counting, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "train",
		alloc{"a", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"},
		alloc{"b", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	counting.migs = nil
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Fatalf("ReleaseOrphan = released %v, %v; want released", released, err)
	}
	if diff := cmp.Diff(map[int]int{0: 1}, counting.migs); diff != "" {
		t.Errorf("MIG device listings by GPU (-want +got):\n%s", diff)
	}
}
