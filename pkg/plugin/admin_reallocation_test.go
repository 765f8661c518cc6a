package plugin

import (
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareReallocatedWithoutAdminAccess: a claim prepared for a device
// with admin access, then allocated the same device for the same request
// without it (its unprepare never arrived), is prepared afresh for
// exclusive use: its record no longer has admin access, and another claim
// allocated the device is refused.
func TestPrepareReallocatedWithoutAdminAccess(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	const dev = "gpu-0-mig-3g40gb-9-4"
	admin := claim(uid1, "train", alloc{"r", driver, node, dev})
	withAdminAccess(admin, 0)
	if r := e.prepare(p, admin); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"r", driver, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := p.PreparedClaims(); len(got) != 1 || len(got[0].Devices) != 1 || got[0].Devices[0].AdminAccess {
		t.Errorf("prepared claims %+v, want %s prepared without admin access", got, dev)
	}
	if r := e.prepare(p, claim(uid2, "other", alloc{"r", driver, node, dev})); !errors.Is(r.Err, ErrAlreadyPrepared) {
		t.Errorf("another claim of %s: %v, want %v", dev, r.Err, ErrAlreadyPrepared)
	}
}
