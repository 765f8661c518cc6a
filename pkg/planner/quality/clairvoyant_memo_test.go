package quality

import "testing"

// TestClairvoyantMemoKeepsStatesApart: states the search reaches by
// different placements share a value only when their futures are the same.
// Each trace runs on one GPU; its first claim, a 3g.40gb, goes to slice 0
// or slice 4, and the two branches meet in states that differ in one
// respect only.
func TestClairvoyantMemoKeepsStatesApart(t *testing.T) {
	checkOneGPU(t, a100(t), map[string]oneGPUCase{
		// 3g at 0: the 4g is dropped, the first 7g served at 15, the GPU is
		// empty at 16 with the second 7g to come. 3g at 4: the 4g runs to
		// 21, the first 7g is dropped, the GPU is empty at 21 with the same
		// 7g to come. Either way 3 claims.
		"arrivals to come": {
			deadline: 0.5,
			claims: []claim{
				{profile: "3g.40gb", large: true, arrive: 0, hold: 10},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 20},
				{profile: "7g.80gb", large: true, arrive: 15, hold: 1},
				{profile: "7g.80gb", large: true, arrive: 30, hold: 1},
			},
			large: 3, total: 3,
		},
		// 3g at 0: the 4g waits and takes slice 0 at 10. 3g at 4: the 4g
		// runs from 1 to 3. At 10 the GPU is empty either way, with the 4g
		// waiting in the first branch only. Either way 3 claims.
		"waiting claims": {
			deadline: 20,
			claims: []claim{
				{profile: "3g.40gb", large: true, arrive: 0, hold: 10},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 2},
				{profile: "7g.80gb", large: true, arrive: 30, hold: 1},
			},
			large: 3, total: 3,
		},
		// 3g at 0: the 4g waits, takes slice 0 at 10 and leaves at 30; the
		// 7g arriving at 15 is dropped at 25. 3g at 4: the 4g runs from 1 to
		// 21 and the 7g is served at 21. When the 7g arrives, the GPU holds
		// the 4g at slice 0 in both branches, leaving at 30 or 21.
		"departure times": {
			deadline: 10,
			claims: []claim{
				{profile: "3g.40gb", large: true, arrive: 0, hold: 10},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 20},
				{profile: "7g.80gb", large: true, arrive: 15, hold: 1},
			},
			large: 3, total: 3,
		},
		// A waiting claim placed now holds its device until now plus its
		// hold. A (3g, 0-12), D (4g, at 1, hold 13), P (7g, at 5, hold 10),
		// Q (7g, at 23, hold 10), R (4g, at 23.5, hold 1). A at slice 0: D
		// is dropped at 11, P served at 12 and leaving at 22, Q served at
		// 23, R at 33: A, P, Q, R. A at slice 4: D served at 1, P at 14
		// (leaving at 24), Q at 24 (leaving at 34, after R's deadline): A,
		// D, P, Q. At 12 in the first branch and 14 in the second the state
		// is the same but for the time (Q next, P waiting, an empty GPU);
		// sharing the first's value (P, Q, R) reported 5.
		"decision time": {
			deadline: 10,
			claims: []claim{
				{profile: "3g.40gb", large: true, arrive: 0, hold: 12},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 13},
				{profile: "7g.80gb", large: true, arrive: 5, hold: 10},
				{profile: "7g.80gb", large: true, arrive: 23, hold: 10},
				{profile: "4g.40gb", large: true, arrive: 23.5, hold: 1},
			},
			large: 4, total: 4,
		},
	})
}

// TestClairvoyantSymmetryMergesStates: the symmetry reduction takes
// effect: on the same trace, the search with it memoises fewer states than
// without it.
func TestClairvoyantSymmetryMergesStates(t *testing.T) {
	m := a100(t)
	tr, err := genTrace(m, DefaultMixes()[0], 2, 10, 0.9, 3600, 1)
	if err != nil {
		t.Fatal(err)
	}
	with, err := solveClairvoyant(m, tr, 2, 60, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	without, err := solveClairvoyantWith(m, tr, 2, 60, 1_000_000, false)
	if err != nil {
		t.Fatal(err)
	}
	if with.states >= without.states {
		t.Errorf("%d states with the symmetry reduction, %d without", with.states, without.states)
	}
}
