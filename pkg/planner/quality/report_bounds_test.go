package quality

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestBoundsFromTraces: the reference of the gap goal is (e) where it is
// solved on every trace, else (d) migrate; the share of (a)→(d) that (e)
// closes is given only where (d) is above (a); the gap closed against the
// clairvoyant search is pooled over the traces it solved, and given only
// where it is above (a) on them.
func TestBoundsFromTraces(t *testing.T) {
	// Large claims served per seed (40 large claims a trace); -1: not
	// solved.
	type served map[string][2]int
	for name, tc := range map[string]struct {
		served served
		want   map[string]any
	}{
		"exact solved everywhere": {
			served: served{FirstFit: {20, 20}, Miglayout: {29, 24}, Migrate: {36, 36}, Exact: {30, 30}, Clairvoyant: {32, -1}},
			want: map[string]any{
				"bound": Exact, "bound large": 0.75, "gap closed": 0.65,
				"exact of migrate gap": 0.625, "clairvoyant large": 0.8, "clairvoyant traces": 1,
				"gap closed vs clairvoyant": 0.75,
			},
		},
		"exact unsolved on a trace": {
			served: served{FirstFit: {20, 20}, Miglayout: {29, 24}, Migrate: {36, 36}, Exact: {30, -1}},
			want: map[string]any{
				"bound": Migrate, "bound large": 0.9, "gap closed": 0.406,
				"exact of migrate gap": math.NaN(), "clairvoyant large": math.NaN(), "clairvoyant traces": 0,
				"gap closed vs clairvoyant": math.NaN(),
			},
		},
		"migrate not above first-fit": {
			served: served{FirstFit: {20, 20}, Miglayout: {20, 20}, Migrate: {18, 18}, Exact: {22, 22}},
			want: map[string]any{
				"bound": Exact, "bound large": 0.55, "gap closed": 0.0,
				"exact of migrate gap": math.NaN(), "clairvoyant large": math.NaN(), "clairvoyant traces": 0,
				"gap closed vs clairvoyant": math.NaN(),
			},
		},
		"no bound above first-fit": {
			served: served{FirstFit: {20, 20}, Miglayout: {29, 24}, Migrate: {20, 20}, Exact: {20, 20}, Clairvoyant: {20, 20}},
			want: map[string]any{
				"bound": Exact, "bound large": 0.5, "gap closed": math.NaN(),
				"exact of migrate gap": math.NaN(), "clairvoyant large": 0.5, "clairvoyant traces": 2,
				"gap closed vs clairvoyant": math.NaN(),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Scenarios: []Scenario{{Name: "s", Models: []string{"loss"}, Exact: true}}, Mixes: []Mix{{Name: "m"}}}
			rep := Report{Config: cfg}
			for strat, bySeed := range tc.served {
				for i, large := range bySeed {
					tr := TraceResult{Scenario: "s", Mix: "m", Model: "loss", Strategy: strat, Seed: uint64(i + 1)}
					if large < 0 {
						tr.NA, tr.Reason = true, "too large"
					} else {
						tr.N, tr.Served, tr.NLarge, tr.ServedLarge = 100, 60+large, 40, large
					}
					rep.Traces = append(rep.Traces, tr)
				}
			}
			rep.build()
			if len(rep.Ratios) != 1 {
				t.Fatalf("%d ratios, want 1", len(rep.Ratios))
			}
			r := rep.Ratios[0]
			round := func(x float64) float64 { return math.Round(1000*x) / 1000 }
			got := map[string]any{
				"bound": r.Bound, "bound large": round(r.BoundLarge), "gap closed": round(r.GapClosed),
				"exact of migrate gap": round(r.ExactOfMigrateGap), "clairvoyant large": round(r.ClairvoyantLarge),
				"clairvoyant traces": r.ClairvoyantTraces, "gap closed vs clairvoyant": round(r.GapClosedClairvoyant),
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("bounds (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGapIntervalTails: the interval is the 2.5th and 97.5th percentiles of
// the gap closed over resampled traces, leaving out resamples with no gap
// (the bound not above first-fit).
func TestGapIntervalTails(t *testing.T) {
	tr := func(strat string, seed uint64, large int) TraceResult {
		return TraceResult{Strategy: strat, Seed: seed, ServedLarge: large}
	}
	for name, tc := range map[string]struct {
		// ml and bound large served per trace; first-fit serves 10.
		ml, bound []int
		lo, hi    float64
	}{
		// Half the gap closed on one trace, no gap on the other: resamples
		// of the second alone are left out.
		"a trace with no gap": {ml: []int{15, 10}, bound: []int{20, 10}, lo: 0.5, hi: 0.5},
		// All of the gap closed on two traces, none on the third: the
		// third alone (1 resample in 27) lies below 5 % but not below
		// 2.5 %.
		"one trace in three closes nothing": {ml: []int{11, 11, 10}, bound: []int{11, 11, 11}, lo: 0, hi: 1},
	} {
		t.Run(name, func(t *testing.T) {
			var ff, ml, b []TraceResult
			for i := range tc.ml {
				seed := uint64(i)
				ff, ml, b = append(ff, tr(FirstFit, seed, 10)), append(ml, tr(Miglayout, seed, tc.ml[i])), append(b, tr(Migrate, seed, tc.bound[i]))
			}
			lo, hi := gapInterval(ff, ml, b)
			if diff := cmp.Diff([2]float64{tc.lo, tc.hi}, [2]float64{lo, hi}); diff != "" {
				t.Errorf("interval (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmissionBound: (e′) is kept at the reward whose policy serves the
// most large claims among those serving at least (a)'s share overall, and
// is the gap goal's reference where it serves more large claims than (e);
// else (e) is.
func TestAdmissionBound(t *testing.T) {
	// Per strategy (and reward for (e′)): claims and large claims served
	// on each of two traces of 100 claims, 40 large.
	type served struct{ all, large int }
	for name, tc := range map[string]struct {
		admission  map[float64]served
		wantReward float64
		wantBound  string
		wantLarge  float64
	}{
		"a reward serves (a)'s share and more large claims": {
			admission:  map[float64]served{0.1: {65, 32}, 0.5: {72, 28}, 1: {76, 26}},
			wantReward: 0.5, wantBound: ExactAdmission, wantLarge: 0.7,
		},
		"the one serving (a)'s share serves fewer large claims than (e)": {
			admission:  map[float64]served{0.1: {65, 32}, 0.5: {72, 24}},
			wantReward: 0.5, wantBound: Exact, wantLarge: 0.625,
		},
		"none serves (a)'s share": {
			admission:  map[float64]served{0.1: {65, 32}, 0.5: {68, 30}},
			wantReward: 0.5, wantBound: Exact, wantLarge: 0.625,
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Scenarios: []Scenario{{Name: "s", Models: []string{"loss"}, Exact: true}}, Mixes: []Mix{{Name: "m"}}}
			rep := Report{Config: cfg}
			add := func(strat string, reward float64, s served) {
				for seed := range uint64(2) {
					rep.Traces = append(rep.Traces, TraceResult{Scenario: "s", Mix: "m", Model: "loss", Strategy: strat, Seed: seed, Reward: reward,
						N: 100, Served: s.all, NLarge: 40, ServedLarge: s.large})
				}
			}
			add(FirstFit, 0, served{70, 20})
			add(Miglayout, 0, served{71, 24})
			add(Migrate, 0, served{80, 36})
			add(Exact, 0, served{75, 25})
			for reward, s := range tc.admission {
				add(ExactAdmission, reward, s)
			}
			rep.build()
			i := slices.IndexFunc(rep.Rows, func(r Row) bool { return r.Strategy == ExactAdmission })
			if i < 0 || !slices.Equal(rep.Rows[i].Rewards, []float64{tc.wantReward, tc.wantReward}) || rep.Rows[i].Traces != 2 {
				t.Fatalf("(e′) row %+v, want reward %g pooled over 2 traces", rep.Rows, tc.wantReward)
			}
			r := rep.Ratios[0]
			if r.Bound != tc.wantBound || math.Abs(r.BoundLarge-tc.wantLarge) > 1e-9 {
				t.Errorf("bound %s (large %.3f), want %s (%.3f)", r.Bound, r.BoundLarge, tc.wantBound, tc.wantLarge)
			}
			if tc.wantBound == ExactAdmission && !slices.Equal(r.BoundRewards, []float64{tc.wantReward, tc.wantReward}) {
				t.Errorf("bound rewards %v, want %g on both folds", r.BoundRewards, tc.wantReward)
			}
		})
	}
}

// TestAdmissionRewardCrossFitted: each fold of traces (by seed parity) is
// scored with the reward chosen on the other fold, so that no trace's
// reference is picked on that trace; a lone fold is scored with its own.
func TestAdmissionRewardCrossFitted(t *testing.T) {
	// Large claims served per seed and reward, of 40; every policy serves
	// 75 of 100 claims, above first-fit's 70.
	for name, tc := range map[string]struct {
		large       map[uint64]map[float64]int
		wantRewards []float64
		wantLarge   int // pooled over the traces kept
	}{
		"the folds disagree": {
			large: map[uint64]map[float64]int{
				0: {0.1: 34, 0.5: 30},
				1: {0.1: 28, 0.5: 33},
			},
			// Seed 0 gets the reward seed 1 prefers, and the other way
			// round: 30 + 28, not 34 + 33.
			wantRewards: []float64{0.5, 0.1}, wantLarge: 58,
		},
		"seeds of a fold pool": {
			large: map[uint64]map[float64]int{
				0: {0.1: 34, 0.5: 30},
				1: {0.1: 28, 0.5: 33},
				2: {0.1: 30, 0.5: 36},
				3: {0.1: 35, 0.5: 26},
			},
			// Even seeds prefer 0.5 (66 against 64), odd ones 0.1 (63
			// against 59).
			wantRewards: []float64{0.1, 0.5}, wantLarge: 34 + 30 + 33 + 26,
		},
		"one seed": {
			large:       map[uint64]map[float64]int{4: {0.1: 34, 0.5: 30}},
			wantRewards: []float64{0.1}, wantLarge: 34,
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Scenarios: []Scenario{{Name: "s", Models: []string{"loss"}, Exact: true}}, Mixes: []Mix{{Name: "m"}}}
			rep := Report{Config: cfg}
			for seed, byReward := range tc.large {
				rep.Traces = append(rep.Traces, TraceResult{Scenario: "s", Mix: "m", Model: "loss", Strategy: FirstFit, Seed: seed, N: 100, Served: 70, NLarge: 40, ServedLarge: 20})
				for reward, large := range byReward {
					rep.Traces = append(rep.Traces, TraceResult{Scenario: "s", Mix: "m", Model: "loss", Strategy: ExactAdmission, Seed: seed, Reward: reward,
						N: 100, Served: 75, NLarge: 40, ServedLarge: large})
				}
			}
			rep.build()
			i := slices.IndexFunc(rep.Rows, func(r Row) bool { return r.Strategy == ExactAdmission })
			if i < 0 {
				t.Fatalf("no (e′) row in %+v", rep.Rows)
			}
			r := rep.Rows[i]
			if diff := cmp.Diff(tc.wantRewards, r.Rewards); diff != "" {
				t.Errorf("rewards (-want +got):\n%s", diff)
			}
			if r.Traces != len(tc.large) || r.ServedLarge != tc.wantLarge {
				t.Errorf("pooled %d traces serving %d large claims, want %d and %d", r.Traces, r.ServedLarge, len(tc.large), tc.wantLarge)
			}
		})
	}
}
