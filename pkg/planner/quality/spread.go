package quality

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// bootstrapResamples is how many resamples of the traces gapInterval draws.
const bootstrapResamples = 1000

// gapInterval is the 95 % percentile-bootstrap interval of the gap closed
// on large claims, (miglayout - firstfit) / (bound - firstfit) of the large
// claims served, pooled: the traces (by seed) are drawn with replacement
// bootstrapResamples times from a fixed seed, so a run prints the same
// interval each time. Resamples where the bound serves no more than
// firstfit have no gap and are left out; NaN, NaN where fewer than two
// traces are shared by all three or no resample has a gap.
func gapInterval(ff, ml, bound []TraceResult) (lo, hi float64) {
	type served struct{ ff, ml, bound int }
	bySeed := map[uint64]*served{}
	for _, t := range ff {
		if !t.NA {
			bySeed[t.Seed] = &served{ff: t.ServedLarge, ml: -1, bound: -1}
		}
	}
	for _, t := range ml {
		if s := bySeed[t.Seed]; s != nil && !t.NA {
			s.ml = t.ServedLarge
		}
	}
	for _, t := range bound {
		if s := bySeed[t.Seed]; s != nil && !t.NA {
			s.bound = t.ServedLarge
		}
	}
	var traces []served
	for _, seed := range slices.Sorted(maps.Keys(bySeed)) {
		if s := bySeed[seed]; s.ml >= 0 && s.bound >= 0 {
			traces = append(traces, *s)
		}
	}
	if len(traces) < 2 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	gaps := make([]float64, 0, bootstrapResamples)
	for range bootstrapResamples {
		var sum served
		for range traces {
			t := traces[rng.IntN(len(traces))]
			sum.ff, sum.ml, sum.bound = sum.ff+t.ff, sum.ml+t.ml, sum.bound+t.bound
		}
		if sum.bound > sum.ff {
			gaps = append(gaps, float64(sum.ml-sum.ff)/float64(sum.bound-sum.ff))
		}
	}
	if len(gaps) == 0 {
		return math.NaN(), math.NaN()
	}
	return percentile(gaps, 0.025), percentile(gaps, 0.975)
}

// servedLess counts the traces (by seed, in both) on which miglayout served
// fewer claims than firstfit, and the traces compared.
func servedLess(ff, ml []TraceResult) (less, compared int) {
	byff := map[uint64]int{}
	for _, t := range ff {
		byff[t.Seed] = t.Served
	}
	for _, t := range ml {
		if n, ok := byff[t.Seed]; ok {
			compared++
			if t.Served < n {
				less++
			}
		}
	}
	return less, compared
}
