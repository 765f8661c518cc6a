package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestRefreshRecreatedLeavesAClaimUnpreparedWhileItIsPreparedAfresh: the
// kubelet unprepares a claim after RefreshRecreated found its MIG device
// made again and while it prepares the claim afresh for the new device
// (reading NVML for it): the claim stays unprepared, with no CDI spec and
// no device recorded as prepared.
func TestRefreshRecreatedLeavesAClaimUnpreparedWhileItIsPreparedAfresh(t *testing.T) {
	e, p, h, c := preparedBesideTheKubelet(t)
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	e.createMIG(d)
	// The first read is RefreshRecreated's, for all claims; the second
	// that of the claim's fresh prepare.
	h.meanwhile = func() {
		h.meanwhile = func() {
			if err := e.unprepare(p, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	if h.meanwhile != nil {
		t.Fatal("the claim was not prepared afresh")
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("PreparedDevices = %v after the kubelet unprepared the claim, want none", got)
	}
	specPath := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	if _, err := os.Stat(specPath); err == nil {
		t.Errorf("CDI spec %s of a claim the kubelet unprepared was written again", specPath)
	}
}
