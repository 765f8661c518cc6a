package quality

import "testing"

// TestClairvoyantBreaksTiesOnTotalServed: among placements serving as many
// large claims, the clairvoyant search takes the one serving the most
// claims: a 3g.40gb at slice 4 leaves room for two 2g.20gb (slices 0 and 2),
// at slice 0 for one only.
func TestClairvoyantBreaksTiesOnTotalServed(t *testing.T) {
	m := a100(t)
	tr := trace{claims: []claim{
		{id: 0, profile: "3g.40gb", large: true, arrive: 0, hold: 100},
		{id: 1, profile: "2g.20gb", arrive: 1, hold: 100},
		{id: 2, profile: "2g.20gb", arrive: 2, hold: 100},
	}}
	res, err := solveClairvoyant(m, tr, 1, 5, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.large != 1 || res.total != 3 {
		t.Errorf("the clairvoyant search serves %d large of %d, want 1 of 3", res.large, res.total)
	}
}
