package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// failingMIGListing is a gpu.Manager whose MIG-device listings fail.
type failingMIGListing struct {
	gpu.Manager
	err error
}

func (m failingMIGListing) MIGDevices(context.Context, int) ([]gpu.MIGDevice, error) {
	return nil, m.err
}

// TestPrepareWhenMIGDevicesCannotBeListed: a prepare of a MIG device whose
// GPU's MIG devices NVML cannot list fails with NVML's error, naming the
// GPU, not as a device that does not exist (ErrDeviceGone, which callers
// such as RefreshRecreated take as no error to report).
func TestPrepareWhenMIGDevicesCannotBeListed(t *testing.T) {
	e := newEnv(t)
	nvmlErr := errors.New("nvmlDeviceGetMigDeviceHandleByIndex: ERROR_UNKNOWN")
	p, err := New(Config{NodeName: node, GPUs: failingMIGListing{Manager: e.gpus, err: nvmlErr}, Locks: e.locks,
		CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	r := e.prepare(p, claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"}))
	if !errors.Is(r.Err, nvmlErr) || errors.Is(r.Err, ErrDeviceGone) {
		t.Errorf("prepare with the MIG devices of GPU 0 unlistable: %v, want %v (not %v)", r.Err, nvmlErr, ErrDeviceGone)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("PreparedDevices = %v after the failed prepare, want none", got)
	}
}
