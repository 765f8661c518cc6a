package quality

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestClairvoyantValueDependsOnDecisionTime: the memo of the clairvoyant
// search tells apart states of the same waiting claims and devices reached
// at different times, since a waiting claim placed now holds its device
// until now plus its hold.
//
// One GPU, deadline 10. A (3g.40gb, 0-12), D (4g.40gb, arrives 1, hold 13),
// P (7g.80gb, arrives 5, hold 10), Q (7g.80gb, arrives 23, hold 10),
// R (4g.40gb, arrives 23.5, hold 1); all large.
//   - A at slice 0: D cannot fit and is dropped at 11; P is served at 12
//     (A leaves), leaves at 22; Q is served at 23, leaves at 33; R waits and
//     is served at 33. Served: A, P, Q, R = 4.
//   - A at slice 4: D is served at 1 (slice 0), leaves at 14; P waits for the
//     whole GPU and is served at 14, leaves at 24; Q and R wait; at 24 Q is
//     served first and leaves at 34, after R's deadline (33.5). Served: A, D,
//     P, Q = 4.
//
// At 12 in the first branch and at 14 in the second the state is the same
// (next arrival Q, P waiting, an empty GPU); a memo keyed without the time
// gave the second branch the first's value (P, Q and R served: 3), and the
// search reported 5 large claims, more than any schedule of the trace
// serves.
func TestClairvoyantValueDependsOnDecisionTime(t *testing.T) {
	m := a100(t)
	tr := trace{claims: []claim{
		{id: 0, profile: "3g.40gb", large: true, arrive: 0, hold: 12},
		{id: 1, profile: "4g.40gb", large: true, arrive: 1, hold: 13},
		{id: 2, profile: "7g.80gb", large: true, arrive: 5, hold: 10},
		{id: 3, profile: "7g.80gb", large: true, arrive: 23, hold: 10},
		{id: 4, profile: "4g.40gb", large: true, arrive: 23.5, hold: 1},
	}}
	res, err := solveClairvoyant(m, tr, 1, 10, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if res.large != 4 || res.total != 4 {
		t.Errorf("the clairvoyant search serves %d large of %d, want 4 of 4 (no schedule serves more)", res.large, res.total)
	}
}

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
	tr := trace{claims: []claim{
		{id: 0, profile: "1g.6gb+me", arrive: 0, hold: 100},
		{id: 1, profile: "2g.12gb+me", arrive: 1, hold: 100},
	}}
	res, err := solveClairvoyant(m, tr, 1, 10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.total != 1 {
		t.Errorf("the clairvoyant search serves %d claims, want 1 (the two media-extension devices do not fit one A30 together)", res.total)
	}
}
