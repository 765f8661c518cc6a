package quality

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOnlineStateBudgetCountsClusterStatesPerArrivalLayer: the budget of
// strategy (e) bounds cluster states (multisets of GPU states) times value
// layers (0 to n arrivals left). With only 7g.80gb claims a GPU is empty or
// full: one GPU has 2 cluster states, two GPUs 3 (both empty, one full,
// both full).
func TestOnlineStateBudgetCountsClusterStatesPerArrivalLayer(t *testing.T) {
	m := a100(t)
	mix := Mix{Name: "7g", Weights: map[string]float64{"7g.80gb": 1}}
	for name, tc := range map[string]struct {
		gpus, n, limit int
		tooLarge       bool
	}{
		"1 GPU, 3 arrivals: 2×4 values fit 8": {gpus: 1, n: 3, limit: 8},
		"1 GPU, 3 arrivals: 2×4 values not 7": {gpus: 1, n: 3, limit: 7, tooLarge: true},
		"2 GPUs, 1 arrival: 3×2 values fit 6": {gpus: 2, n: 1, limit: 6},
		"2 GPUs, 1 arrival: 3×2 values not 5": {gpus: 2, n: 1, limit: 5, tooLarge: true},
		"2 GPUs, no arrival: 3 values fit 3":  {gpus: 2, n: 0, limit: 3},
		"2 GPUs, no arrival: 3 values not 2":  {gpus: 2, n: 0, limit: 2, tooLarge: true},
	} {
		t.Run(name, func(t *testing.T) {
			dp, err := newOnlineDP(m, mix, tc.gpus, tc.n, 0.9, tc.limit)
			if tc.tooLarge {
				if !errors.Is(err, errOnlineTooLarge) {
					t.Errorf("error %v, want %v", err, errOnlineTooLarge)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(dp.tuples), tc.gpus+1; got != want {
				t.Errorf("%d cluster states, want %d", got, want)
			}
		})
	}
}

// TestOnlineMixWeightsAreRelative: a mix's weights are shares of the
// arrivals: scaling them all by the same factor changes neither the arrival
// rate nor the policy's value.
func TestOnlineMixWeightsAreRelative(t *testing.T) {
	m := a100(t)
	const n = 4
	unit, err := newOnlineDP(m, Mix{Name: "unit", Weights: map[string]float64{"1g.10gb": 1, "7g.80gb": 1}}, 1, n, 0.9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := newOnlineDP(m, Mix{Name: "scaled", Weights: map[string]float64{"1g.10gb": 3, "7g.80gb": 3}}, 1, n, 0.9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(unit.rho-scaled.rho) > 1e-12 {
		t.Errorf("ρ = %g with weights 3:3, %g with 1:1", scaled.rho, unit.rho)
	}
	if diff := cmp.Diff(unit.share, scaled.share); diff != "" {
		t.Errorf("arrival shares (-1:1 +3:3):\n%s", diff)
	}
	if u, s := emptyValue(unit, unit.value, n), emptyValue(scaled, scaled.value, n); math.Abs(u-s) > 1e-12 {
		t.Errorf("value %.12f with weights 3:3, %.12f with 1:1", s, u)
	}
}

// TestOnlineRejectsProfileOutsideModel: a mix naming a profile the GPU
// model lacks is an error, not a mix without it.
func TestOnlineRejectsProfileOutsideModel(t *testing.T) {
	m := a100(t)
	mix := Mix{Name: "typo", Weights: map[string]float64{"7g.80gb": 1, "9g.90gb": 1}}
	if _, err := newOnlineDP(m, mix, 1, 1, 0.9, 1000); err == nil {
		t.Error("no error for a mix with 9g.90gb on an A100")
	}
}

// TestSolveOnlineSolvesEachConfiguration: solved policies are shared only
// between identical configurations: a different GPU count or load gets its
// own policy.
func TestSolveOnlineSolvesEachConfiguration(t *testing.T) {
	m := a100(t)
	mix := Mix{Name: "7g-configurations", Weights: map[string]float64{"7g.80gb": 1}}
	for name, tc := range map[string]struct {
		gpus int
		load float64
	}{
		"1 GPU at 0.9":  {1, 0.9},
		"2 GPUs at 0.9": {2, 0.9},
		"1 GPU at 0.5":  {1, 0.5},
	} {
		dp, err := solveOnline(m, mix, tc.gpus, 2, tc.load, 1000)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// A 7g.80gb weighs one GPU: ρ is the load times the GPUs.
		if dp.gpus != tc.gpus || math.Abs(dp.rho-tc.load*float64(tc.gpus)) > 1e-12 {
			t.Errorf("%s: policy for %d GPUs at ρ %g", name, dp.gpus, dp.rho)
		}
	}
}

// TestOnlineFixedRuleWithOneChoiceIsOptimal: where every arrival has at
// most one place to go (7g.80gb claims on one GPU), a fixed placement rule
// is worth exactly the optimal policy, reward of each served claim
// included.
func TestOnlineFixedRuleWithOneChoiceIsOptimal(t *testing.T) {
	m := a100(t)
	const n = 3
	dp, err := newOnlineDP(m, Mix{Name: "7g", Weights: map[string]float64{"7g.80gb": 1}}, 1, n, 0.9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	v := dp.values(n, func(c, pi int, next []int) int { return 0 })
	for k := range v {
		for c := range v[k] {
			if math.Abs(v[k][c]-dp.value[k][c]) > 1e-12 {
				t.Errorf("state %v with %d left: rule worth %.12f, optimum %.12f", dp.tuples[c], k, v[k][c], dp.value[k][c])
			}
		}
	}
}
