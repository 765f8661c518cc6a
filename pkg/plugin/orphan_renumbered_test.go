package plugin

import (
	"errors"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReleaseOrphanAfterRenumbering: a process runs on the MIG device a
// claim was prepared with on GPU 1; GPU 0 leaves the node and the restarted
// plugin reads the board as GPU 0, its device named gpu-0-... now. The
// claim, gone from the API, is not released (a lookup by the recorded name
// found nothing and took the device for idle), so a second claim allocated
// the device under its new name is refused.
func TestReleaseOrphanAfterRenumbering(t *testing.T) {
	r := newRenumberRig(t)
	if _, err := r.sim.StartProcess(r.md.UUID, 1024); err != nil {
		t.Fatal(err)
	}
	p := r.renumbered(t)
	_, released, err := p.ReleaseOrphan(r.ctx, "uid-1", nil)
	if released || !errors.Is(err, ErrOrphanInUse) {
		t.Errorf("ReleaseOrphan of claim 1 = released %v, error %v; want kept, ErrOrphanInUse (a process runs on %s)", released, err, r.md.UUID)
	}
	second := claim("uid-2", "second", alloc{"gpu", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-0"})
	res, _ := p.PrepareResourceClaims(r.ctx, []*resourceapi.ResourceClaim{second})
	if res[second.UID].Err == nil {
		t.Errorf("claim 2 prepared device %s while claim 1's process runs on it", r.md.UUID)
	}
}
