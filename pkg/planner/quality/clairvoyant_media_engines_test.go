package quality

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestClairvoyantRespectsSharedMediaEngines: the clairvoyant search places
// no device whose media engines the GPU's other devices have taken, as
// mig.Model.Validate and strategy (e)'s state enumeration refuse them. An
// A30-24GB has one OFA and one JPEG engine, and 1g.6gb+me and 2g.12gb+me
// each need both: only one of the two claims is served.
func TestClairvoyantRespectsSharedMediaEngines(t *testing.T) {
	m, err := mig.DefaultCatalog().Model("A30-24GB")
	if err != nil {
		t.Fatal(err)
	}
	claims := []claim{
		{profile: "1g.6gb+me", arrive: 0, hold: 100},
		{profile: "2g.12gb+me", arrive: 1, hold: 100},
	}
	if _, total := solveOnOneGPU(t, m, 10, claims); total != 1 {
		t.Errorf("the clairvoyant search serves %d claims, want 1 (the two media-extension devices do not fit one A30 together)", total)
	}
}
