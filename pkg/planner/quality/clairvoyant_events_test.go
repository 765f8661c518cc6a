package quality

import (
	"errors"
	"slices"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestClairvoyantEventRules: the clairvoyant search serves claims the way
// the loss model does: a waiting claim takes a device as soon as one fits
// (at a departure too, after the last arrival as well) and is dropped once
// it has waited the deadline; a device is held from service, not from
// arrival; every waiting claim that fits is placed, whatever comes before
// it in arrival order; and a GPU holds no more devices of a profile than
// the profile's limit.
func TestClairvoyantEventRules(t *testing.T) {
	checkOneGPU(t, a100(t), map[string]oneGPUCase{
		"a waiting claim takes the device a departure frees, after the last arrival": {
			deadline: 10,
			claims: []claim{
				{profile: "7g.80gb", large: true, arrive: 0, hold: 5},
				{profile: "7g.80gb", large: true, arrive: 1, hold: 1},
			},
			large: 2, total: 2,
		},
		"a claim arriving as a device leaves takes it": {
			deadline: 1,
			claims: []claim{
				{profile: "7g.80gb", large: true, arrive: 0, hold: 5},
				{profile: "7g.80gb", large: true, arrive: 5, hold: 1},
			},
			large: 2, total: 2,
		},
		// The second claim is served at 2 and leaves at 12; the third
		// waits from 9.5 to 11.5 for it and is dropped.
		"a device is held from service, not from arrival": {
			deadline: 2,
			claims: []claim{
				{profile: "7g.80gb", large: true, arrive: 0, hold: 2},
				{profile: "7g.80gb", large: true, arrive: 1, hold: 10},
				{profile: "7g.80gb", large: true, arrive: 9.5, hold: 1},
			},
			large: 2, total: 2,
		},
		"two waiting claims both take devices when a departure frees room": {
			deadline: 10,
			claims: []claim{
				{profile: "7g.80gb", large: true, arrive: 0, hold: 5},
				{profile: "1g.10gb", arrive: 1, hold: 100},
				{profile: "1g.10gb", arrive: 2, hold: 100},
			},
			large: 1, total: 3,
		},
		// The 4g.40gb waits for slice 0 and is dropped at 11; the 3g.40gb
		// after it fits at slice 4 at once.
		"a claim that does not fit does not hold back those after it": {
			deadline: 10,
			claims: []claim{
				{profile: "4g.40gb", large: true, arrive: 0, hold: 50},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 100},
				{profile: "3g.40gb", large: true, arrive: 2, hold: 100},
			},
			large: 2, total: 2,
		},
		// Two 3g.40gb take all eight memory slices, so beside the 1g.20gb
		// only one fits, although the three need only 7 compute slices.
		"no device overlaps another": {
			deadline: 0.5,
			claims: []claim{
				{profile: "1g.20gb", arrive: 0, hold: 100},
				{profile: "3g.40gb", large: true, arrive: 1, hold: 100},
				{profile: "3g.40gb", large: true, arrive: 2, hold: 100},
			},
			large: 1, total: 2,
		},
		"a 1g.10gb goes where a later 4g.40gb still fits": {
			deadline: 0.5,
			claims: []claim{
				{profile: "1g.10gb", arrive: 0, hold: 100},
				{profile: "4g.40gb", large: true, arrive: 1, hold: 100},
			},
			large: 1, total: 2,
		},
		"one 1g.10gb+me per GPU": {
			deadline: 10,
			claims: []claim{
				{profile: "1g.10gb+me", arrive: 0, hold: 100},
				{profile: "1g.10gb+me", arrive: 1, hold: 100},
			},
			large: 0, total: 1,
		},
	})
}

// oneGPUCase is a trace on one GPU (claims numbered in their order) and
// the large and all claims the clairvoyant search serves of it.
type oneGPUCase struct {
	deadline     float64
	claims       []claim
	large, total int
}

// checkOneGPU checks each case on a GPU of model m, as a subtest.
func checkOneGPU(t *testing.T, m *mig.Model, cases map[string]oneGPUCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if large, total := solveOnOneGPU(t, m, tc.deadline, tc.claims); large != tc.large || total != tc.total {
				t.Errorf("serves %d large of %d, want %d of %d", large, total, tc.large, tc.total)
			}
		})
	}
}

// solveOnOneGPU runs the clairvoyant search on one GPU of m over claims
// (numbered in their order, with a budget of 10,000 states) and returns
// the large and all claims it serves.
func solveOnOneGPU(t *testing.T, m *mig.Model, deadline float64, claims []claim) (large, total int) {
	t.Helper()
	tr := trace{claims: slices.Clone(claims)}
	for i := range tr.claims {
		tr.claims[i].id = i
	}
	res, err := solveClairvoyant(m, tr, 1, deadline, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	return res.large, res.total
}

// TestClairvoyantStateBudget: the search reports how many states it
// memoised and gives up on a budget of none. Two 7g.80gb claims one after
// the other on one GPU take three states: at the first arrival, at its
// departure, and at the second arrival (nothing is left to decide after).
func TestClairvoyantStateBudget(t *testing.T) {
	m := a100(t)
	tr := trace{claims: []claim{
		{id: 0, profile: "7g.80gb", large: true, arrive: 0, hold: 1},
		{id: 1, profile: "7g.80gb", large: true, arrive: 2, hold: 1},
	}}
	res, err := solveClairvoyant(m, tr, 1, 0.5, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := (clairvoyantResult{large: 2, total: 2, states: 3}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if _, err := solveClairvoyant(m, tr, 1, 0.5, 0); !errors.Is(err, errClairvoyantTooLarge) {
		t.Errorf("budget of no state: error %v, want %v", err, errClairvoyantTooLarge)
	}
}

// TestClairvoyantRejectsProfileOutsideModel: a claim for a profile the GPU
// model lacks is an error.
func TestClairvoyantRejectsProfileOutsideModel(t *testing.T) {
	tr := trace{claims: []claim{{profile: "9g.90gb", arrive: 0, hold: 1}}}
	if _, err := solveClairvoyant(a100(t), tr, 1, 10, 1000); err == nil {
		t.Error("no error for a 9g.90gb claim on an A100")
	}
}
