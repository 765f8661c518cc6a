package plugin

import (
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareRefusesAnUnknownDeviceNameAtOnce: a device of this driver
// whose name the driver never publishes fails the prepare with
// ErrDeviceGone at once, which no retry mends, even while GPU 0 is being
// reconfigured: the name is not taken for one on GPU 0, whose lock the
// prepare would otherwise ask for (and be refused, ErrReconfiguring, as
// if a retry could succeed).
func TestPrepareRefusesAnUnknownDeviceNameAtOnce(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	end, err := e.locks.BeginReconfigure(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	for _, name := range []string{"nic-0", "gpu-0-foo"} {
		r := e.prepare(p, claim(uid1, "train", alloc{"dev", slices.DefaultDriverName, node, name}))
		if !errors.Is(r.Err, ErrDeviceGone) || errors.Is(r.Err, gpulock.ErrReconfiguring) {
			t.Errorf("prepare of device %q with GPU 0 reconfiguring: %v, want %v", name, r.Err, ErrDeviceGone)
		}
	}
}
