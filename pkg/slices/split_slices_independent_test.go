package slices

import "testing"

// The slices of a split pool do not share room: appending a device to one
// slice (as a caller adding a device to the built pool might) leaves the
// next slice's devices as they are.
func TestSplitSlicesDoNotOverlap(t *testing.T) {
	res, err := BuildPoolFromDevices("node-a", fakeDevices(129, 0))
	if err != nil {
		t.Fatal(err)
	}
	pool := res.Pools["node-a"]
	if len(pool.Slices) != 2 {
		t.Fatalf("pool of 129 devices: %d slices, want 2", len(pool.Slices))
	}
	first := pool.Slices[0].Devices
	_ = append(first, fakeDevices(1, 0)[0])
	if got := pool.Slices[1].Devices[0].Name; got != "dev-128" {
		t.Errorf("after appending to the first slice, the second slice starts with %q, want dev-128", got)
	}
}
