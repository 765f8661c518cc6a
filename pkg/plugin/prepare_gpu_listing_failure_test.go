package plugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareWhenTheGPUsCannotBeListed: a prepare while NVML cannot list
// the node's GPUs at all fails with that error, not as a device that does
// not exist (ErrDeviceGone): the devices may well be there.
func TestPrepareWhenTheGPUsCannotBeListed(t *testing.T) {
	e := newEnv(t)
	p, err := New(Config{NodeName: node, GPUs: unlistable{e.gpus}, Locks: e.locks,
		CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	r := e.prepare(p, claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"}))
	if r.Err == nil || errors.Is(r.Err, ErrDeviceGone) || !strings.Contains(r.Err.Error(), "listing GPUs: NVML is down") {
		t.Errorf("prepare with the GPUs unlistable: %v, want the listing error (listing GPUs: NVML is down), not %v", r.Err, ErrDeviceGone)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("PreparedDevices = %v after the failed prepare, want none", got)
	}
}
