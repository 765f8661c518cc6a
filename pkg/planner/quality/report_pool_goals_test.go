package quality

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPoolSumsSolvedTraces: a row pools the traces of its strategy: it
// counts every trace, sums the figures of those solved only (a trace not
// solved gives the row its reason), takes percentiles of the pooled waits
// (3g and up as large), and, given seeds to keep, pools only those.
func TestPoolSumsSolvedTraces(t *testing.T) {
	ts := []TraceResult{
		{Seed: 1, N: 10, Served: 8, NLarge: 4, ServedLarge: 3, Destroyed: 6, Moved: 1, Drops: 2, LargeDrops: 1,
			Waits: map[string][]float64{"3g.40gb": {1, 2}, "1g.10gb": {50}}},
		{Seed: 2, NA: true, Reason: "loss model only", N: 10, Served: 10, Destroyed: 100},
		{Seed: 3, N: 10, Served: 6, NLarge: 5, ServedLarge: 2, Destroyed: 2, Drops: 4, LargeDrops: 3,
			Waits: map[string][]float64{"3g.40gb": {4, math.Inf(1)}}},
	}
	row := func(r Row) map[string]any {
		return map[string]any{
			"traces": r.Traces, "solved": r.Solved, "na": r.NA, "reason": r.Reason,
			"n": r.N, "served": r.Served, "large": r.NLarge, "served large": r.ServedLarge,
			"destroyed": r.Destroyed, "moved": r.Moved, "drops": r.Drops, "large drops": r.LargeDrops,
			"destroyed per served": r.DestroyedPerServed(),
			"p50 large":            r.P50Large, "p95 large": r.P95Large, "p95 1g": r.P95["1g.10gb"],
		}
	}
	for name, tc := range map[string]struct {
		keep map[uint64]bool
		want map[string]any
	}{
		"every trace": {
			want: map[string]any{
				"traces": 3, "solved": 2, "na": false, "reason": "loss model only",
				"n": 20, "served": 14, "large": 9, "served large": 5,
				"destroyed": 8, "moved": 1, "drops": 6, "large drops": 4,
				"destroyed per served": 8.0 / 14,
				"p50 large":            2.0, "p95 large": math.Inf(1), "p95 1g": 50.0,
			},
		},
		"the seeds kept": {
			keep: map[uint64]bool{1: true},
			want: map[string]any{
				"traces": 1, "solved": 1, "na": false, "reason": "",
				"n": 10, "served": 8, "large": 4, "served large": 3,
				"destroyed": 6, "moved": 1, "drops": 2, "large drops": 1,
				"destroyed per served": 6.0 / 8,
				"p50 large":            1.0, "p95 large": 2.0, "p95 1g": 50.0,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := row(pool(rowKey{"s", "m", "loss", FirstFit}, ts, tc.keep))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoalsAtTheirThresholds: each goal is met at its threshold: with no
// gap to close, miglayout serving as many large claims as first-fit; a
// served ratio of exactly 1; a p95 ratio of exactly 0.5.
func TestGoalsAtTheirThresholds(t *testing.T) {
	type goals struct{ Gap, Served, Wait bool }
	for name, tc := range map[string]struct {
		r    Ratio
		want goals
	}{
		"no gap, as many large claims served": {
			r:    Ratio{Bound: Migrate, GapClosed: math.NaN(), FirstFitLarge: 0.5, MiglayoutLarge: 0.5, HasLoss: true, ServedRatioLoss: 1},
			want: goals{Gap: true, Served: true, Wait: true},
		},
		"no gap, fewer large claims served": {
			r:    Ratio{Bound: Migrate, GapClosed: math.NaN(), FirstFitLarge: 0.5, MiglayoutLarge: 0.4, HasLoss: true, ServedRatioLoss: 0.999},
			want: goals{Gap: false, Served: false, Wait: true},
		},
		"no reference": {
			r:    Ratio{GapClosed: 0.9, HasLoss: true, ServedRatioLoss: 1},
			want: goals{Gap: false, Served: true, Wait: true},
		},
		"served ratio 1 in both models, p95 halved": {
			r:    Ratio{Bound: Exact, GapClosed: 0.5, HasLoss: true, ServedRatioLoss: 1, HasQueue: true, ServedRatioQueue: 1, P95LargeRatio: 0.5},
			want: goals{Gap: true, Served: true, Wait: true},
		},
		"p95 above half": {
			r:    Ratio{Bound: Exact, GapClosed: 0.49, HasQueue: true, ServedRatioQueue: 1.2, P95LargeRatio: 0.51},
			want: goals{Gap: false, Served: true, Wait: false},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got goals
			got.Gap, got.Served, got.Wait = tc.r.Goals()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("goals (-want +got):\n%s", diff)
			}
		})
	}
}

// TestP95RatioEdges: the p95 wait ratio of large claims (miglayout over
// first-fit, queue model) is 1 where both are equal, ∞ included, and ∞ where
// first-fit serves at once and miglayout does not.
func TestP95RatioEdges(t *testing.T) {
	inf := math.Inf(1)
	for name, tc := range map[string]struct {
		ff, ml []float64
		want   float64
	}{
		"both never serve":                   {ff: []float64{inf}, ml: []float64{inf}, want: 1},
		"both serve at once":                 {ff: []float64{0}, ml: []float64{0}, want: 1},
		"first-fit at once, miglayout waits": {ff: []float64{0}, ml: []float64{5}, want: inf},
		"miglayout waits half as long":       {ff: []float64{10}, ml: []float64{5}, want: 0.5},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Scenarios: []Scenario{{Name: "s", Models: []string{"queue"}}}, Mixes: []Mix{{Name: "m"}}}
			rep := Report{Config: cfg}
			for strat, waits := range map[string][]float64{FirstFit: tc.ff, Miglayout: tc.ml} {
				rep.Traces = append(rep.Traces, TraceResult{Scenario: "s", Mix: "m", Model: "queue", Strategy: strat, Seed: 1,
					N: 1, NLarge: 1, Waits: map[string][]float64{"4g.40gb": waits}})
			}
			rep.build()
			if len(rep.Ratios) != 1 {
				t.Fatalf("%d ratios, want 1", len(rep.Ratios))
			}
			if got := rep.Ratios[0].P95LargeRatio; got != tc.want {
				t.Errorf("p95 ratio %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRowSharesOfNothingAreUndefined: a share or a ratio over no claims is
// undefined (shown as -), not infinite.
func TestRowSharesOfNothingAreUndefined(t *testing.T) {
	r := Row{Destroyed: 3, ServedLarge: 1, Served: 1}
	for name, got := range map[string]float64{
		"destroyed per served": Row{Destroyed: 3}.DestroyedPerServed(),
		"large share":          r.LargeShare(),
		"served share":         r.ServedShare(),
	} {
		if !math.IsNaN(got) {
			t.Errorf("%s = %v, want NaN", name, got)
		}
	}
}
