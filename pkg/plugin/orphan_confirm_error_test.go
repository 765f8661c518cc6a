package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReleaseOrphanKeepsClaimWhenConfirmationFails: where stillGone fails
// (the API server cannot be reached within orphanConfirmTimeout), the claim
// is not released, whatever its answer alongside, and ReleaseOrphan returns
// the error: an unconfirmed release would let the device be prepared for
// another claim while the claim may still hold it.
func TestReleaseOrphanKeepsClaimWhenConfirmationFails(t *testing.T) {
	tests := map[string]bool{"answer gone": true, "answer back": false}
	for name, answer := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			calls := 0
			p := e.countingPlugin(&calls)
			if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
				t.Fatal(r.Err)
			}
			apiErr := errors.New("the server was unable to return a response in the time allotted")
			failing := func(context.Context) (bool, error) { return answer, apiErr }
			if _, released, err := p.ReleaseOrphan(t.Context(), uid1, failing); released || !errors.Is(err, apiErr) {
				t.Fatalf("ReleaseOrphan = released %v, %v; want kept, %v", released, err, apiErr)
			}
			if len(p.PreparedDevices()) != 1 || len(e.plugin("").PreparedDevices()) != 1 || calls != 0 {
				t.Errorf("prepared devices %v, in the checkpoint %v, OnUnprepared called %d times; want the claim kept, no call",
					p.PreparedDevices(), e.plugin("").PreparedDevices(), calls)
			}
		})
	}
}
