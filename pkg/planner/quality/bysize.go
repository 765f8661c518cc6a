package quality

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/miglayout/miglayout/pkg/mig"
)

// SizeRow compares, for one mix on a cluster of GPUs GPUs, in the model the
// optimal online policy is solved in (onlineDP: Poisson arrivals, 12 per
// GPU, exponential holds, a claim that does not fit lost at once, instant
// service), the share of large claims (3g and up) served by first-fit in
// device-name order, best fit (least room for large profiles lost), the
// optimal policy that never moves a device and serves a claim whenever a
// placement exists ((e); one that may turn claims away, (e′), is not
// solved here and can serve more large claims), and free migration.
type SizeRow struct {
	Mix      string
	GPUs     int
	Arrivals int
	// Large-claim shares served. Optimum is exact; the others are the means
	// of Paths simulated arrival sequences (standard error about 0.001 at
	// 200,000 paths).
	FirstFit, BestFit, Optimum, Migration float64
	Paths                                 int
	// OptimumCloses is the share of the gap between first-fit and
	// migration that the optimum closes; BestFitCloses the share of the gap
	// between first-fit and the optimum that best fit closes.
	OptimumCloses, BestFitCloses float64
}

// maxSizeGPUs is the largest cluster BoundsBySize solves: 3 GPUs of an
// A100-80GB with its five default profiles are 4.5 million states (about
// three minutes per mix on one core).
const maxSizeGPUs = 3

// BoundsBySize solves the optimal online policy of cfg's loss model (its
// load, model and mixes) on clusters of each size in gpus (1 to 3 GPUs)
// and simulates first-fit, best fit and migration in the same model, to
// show how far the best any no-migration policy can reach is from
// migration as clusters grow: where the optimum closes less of the gap
// than a goal asks on small clusters, no placement rule can meet the goal
// against migration on larger ones unless that share grows with size.
func BoundsBySize(cfg Config, gpus []int, paths int) ([]SizeRow, error) {
	m, err := mig.DefaultCatalog().Model(cfg.Model)
	if err != nil {
		return nil, err
	}
	var out []SizeRow
	for _, mix := range cfg.Mixes {
		one, err := newOnlineDP(m, mix, 1, 0, cfg.LossLoad, 1<<20)
		if err != nil {
			return nil, err
		}
		w := newSizeWorld(one)
		for _, g := range gpus {
			if g < 1 || g > maxSizeGPUs {
				return nil, fmt.Errorf("bounds by size: %d GPUs (solved for 1 to %d)", g, maxSizeGPUs)
			}
			n := 12 * g
			rho := one.rho * float64(g)
			r := SizeRow{Mix: mix.Name, GPUs: g, Arrivals: n, Paths: paths}
			large := float64(n) * w.shareLarge
			r.Optimum = w.optimum(g, rho, n) / large
			r.FirstFit = w.simulate(g, rho, n, paths, w.firstFit) / large
			r.BestFit = w.simulate(g, rho, n, paths, w.bestFit) / large
			r.Migration = w.migrate(g, rho, n, paths) / large
			r.OptimumCloses = (r.Optimum - r.FirstFit) / (r.Migration - r.FirstFit)
			r.BestFitCloses = (r.BestFit - r.FirstFit) / (r.Optimum - r.FirstFit)
			out = append(out, r)
		}
	}
	return out, nil
}

// FormatBoundsBySize prints rows as a table.
func FormatBoundsBySize(rows []SizeRow) string {
	var b strings.Builder
	b.WriteString("Bounds by cluster size (exact optimum of the loss model among policies that serve whenever a placement exists, (e): Poisson arrivals, 12 per GPU, claims lost when they do not fit at once, instant service; the others simulated):\n")
	fmt.Fprintf(&b, "  %12s %5s %9s %9s %9s %9s %9s  %26s  %28s\n", "mix", "GPUs", "arrivals", "(a) ff", "bestfit", "optimum", "(d) mig", "optimum closes of (a)→(d)", "bestfit closes of (a)→opt")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %12s %5d %9d %8.1f%% %8.1f%% %8.1f%% %8.1f%%  %25.1f%%  %27.1f%%\n", r.Mix, r.GPUs, r.Arrivals,
			100*r.FirstFit, 100*r.BestFit, 100*r.Optimum, 100*r.Migration, 100*r.OptimumCloses, 100*r.BestFitCloses)
	}
	return b.String()
}

// sizeWorld is one GPU's states and transitions (from a one-GPU onlineDP)
// with what the policies compared by size need.
type sizeWorld struct {
	one        *onlineDP
	ndev       []int
	cum        []float64
	large      []bool
	shareLarge float64
	// rank[s][p][k]: best fit's preference for placing profs[p] at its k-th
	// placement on GPU state s (higher is better).
	rank  [][][]int
	packs *feasibleSet
}

func newSizeWorld(one *onlineDP) *sizeWorld {
	w := &sizeWorld{one: one}
	for _, l := range one.states {
		w.ndev = append(w.ndev, len(l))
	}
	c := 0.0
	var names []string
	for pi, p := range one.profs {
		c += one.share[pi]
		w.cum = append(w.cum, c)
		w.large = append(w.large, isLarge(p))
		if isLarge(p) {
			w.shareLarge += one.share[pi]
		}
		names = append(names, p.Name)
	}
	w.packs, _ = newFeasibleSet(one.m, names)
	type move struct{ s, pi, k int }
	loss := map[move][]int{}
	var all []move
	w.rank = make([][][]int, len(one.states))
	for s, l := range one.states {
		before := one.m.Headroom(l)
		w.rank[s] = make([][]int, len(one.profs))
		for pi := range one.profs {
			w.rank[s][pi] = make([]int, len(one.add[s][pi]))
			for k, ns := range one.add[s][pi] {
				if ns < 0 {
					continue
				}
				after := one.m.Headroom(one.states[ns])
				v := make([]int, len(before))
				for i := range before {
					v[i] = after[i] - before[i]
				}
				loss[move{s, pi, k}] = v
				all = append(all, move{s, pi, k})
			}
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return slices.Compare(loss[all[a]], loss[all[b]]) < 0 })
	rk := 0
	for i, mv := range all {
		if i > 0 && slices.Compare(loss[all[i-1]], loss[mv]) != 0 {
			rk++
		}
		w.rank[mv.s][mv.pi][mv.k] = rk + 1
	}
	return w
}

// tupleIndex numbers sorted tuples of GPU states (t[0] ≤ t[1] ≤ ...; up to
// three) densely: the combinatorial number system of multisets.
func tupleIndex(t []int) int {
	switch len(t) {
	case 1:
		return t[0]
	case 2:
		return t[1]*(t[1]+1)/2 + t[0]
	default:
		return t[2]*(t[2]+1)*(t[2]+2)/6 + t[1]*(t[1]+1)/2 + t[0]
	}
}

// replaceSorted returns t with t[i] set to v, sorted, in out.
func replaceSorted(t []int, i, v int, out []int) []int {
	out = append(out[:0], t...)
	out[i] = v
	for a := 1; a < len(out); a++ {
		for b := a; b > 0 && out[b-1] > out[b]; b-- {
			out[b-1], out[b] = out[b], out[b-1]
		}
	}
	return out
}

// optimum is the optimal policy's expected reward (large claims served,
// plus onlineEpsilon per claim) over n arrivals from the empty cluster of
// g GPUs at ρ: onlineDP.values' recursion over sorted tuples of GPU states
// indexed by tupleIndex, keeping two arrival layers only.
func (w *sizeWorld) optimum(g int, rho float64, n int) float64 {
	S := len(w.one.states)
	var tuples [][]int
	var rec func(cur []int, from int)
	rec = func(cur []int, from int) {
		if len(cur) == g {
			tuples = append(tuples, slices.Clone(cur))
			return
		}
		for s := from; s < S; s++ {
			rec(append(cur, s), s)
		}
	}
	rec(nil, 0)
	devs := make([]int, len(tuples))
	for i, t := range tuples {
		for _, s := range t {
			devs[i] += w.ndev[s]
		}
	}
	// A departure leads to fewer devices: solve those first.
	order := make([]int, len(tuples))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return devs[order[a]] < devs[order[b]] })
	prev, cur := make([]float64, len(tuples)), make([]float64, len(tuples))
	buf := make([]int, 0, g)
	for k := 1; k <= n; k++ {
		for _, o := range order {
			t, c := tuples[o], tupleIndex(tuples[o])
			a := 0.0
			for pi := range w.one.profs {
				r := onlineEpsilon
				if w.large[pi] {
					r++
				}
				best, fits := 0.0, false
				for i, s := range t {
					if i > 0 && t[i-1] == s {
						continue
					}
					for _, ns := range w.one.add[s][pi] {
						if ns < 0 {
							continue
						}
						buf = replaceSorted(t, i, ns, buf)
						if v := r + prev[tupleIndex(buf)]; !fits || v > best {
							best, fits = v, true
						}
					}
				}
				if !fits {
					best = prev[c]
				}
				a += w.one.share[pi] * best
			}
			d := 0.0
			for i, s := range t {
				for _, ns := range w.one.del[s] {
					buf = replaceSorted(t, i, ns, buf)
					d += cur[tupleIndex(buf)]
				}
			}
			cur[c] = (rho*a + d) / (rho + float64(devs[o]))
		}
		prev, cur = cur, prev
	}
	return prev[0]
}

// firstFit and bestFit place profs[pi] in GPU states x (ordered GPUs):
// the GPU and placement index, or GPU -1.
func (w *sizeWorld) firstFit(x []int, pi int) (int, int) {
	for g, s := range x {
		for k, ns := range w.one.add[s][pi] {
			if ns >= 0 {
				return g, k
			}
		}
	}
	return -1, 0
}

func (w *sizeWorld) bestFit(x []int, pi int) (int, int) {
	bg, bk, br := -1, 0, 0
	for g, s := range x {
		for k, ns := range w.one.add[s][pi] {
			if ns >= 0 && w.rank[s][pi][k] > br {
				bg, bk, br = g, k, w.rank[s][pi][k]
			}
		}
	}
	return bg, bk
}

// event draws the next event of the jump chain with devs devices held:
// an arrival of profile pi (pi ≥ 0), or the departure of device j.
func (w *sizeWorld) event(rng *rand.Rand, rho float64, devs int) (pi, j int) {
	u := rng.Float64() * (rho + float64(devs))
	if u < rho {
		return min(sort.SearchFloat64s(w.cum, rng.Float64()), len(w.cum)-1), -1
	}
	return -1, int(u - rho)
}

// simulate is the mean number of large claims a placement policy serves
// over n arrivals from the empty cluster, over paths seeded sequences.
func (w *sizeWorld) simulate(g int, rho float64, n, paths int, place func([]int, int) (int, int)) float64 {
	total := 0
	x := make([]int, g)
	for p := range paths {
		rng := rand.New(rand.NewPCG(uint64(p), 0x73697a65))
		clear(x) // state 0: no device
		devs := 0
		for left := n; left > 0; {
			pi, j := w.event(rng, rho, devs)
			if pi >= 0 {
				left--
				if gi, k := place(x, pi); gi >= 0 {
					x[gi] = w.one.add[x[gi]][pi][k]
					devs++
					if w.large[pi] {
						total++
					}
				}
				continue
			}
			for gi, s := range x {
				if j < w.ndev[s] {
					x[gi] = w.one.del[s][j]
					break
				}
				j -= w.ndev[s]
			}
			devs--
		}
	}
	return float64(total) / float64(paths)
}

// migrate is simulate for free migration: a claim is served whenever the
// devices held and it can be packed on the g GPUs, wherever they are.
func (w *sizeWorld) migrate(g int, rho float64, n, paths int) float64 {
	memo := map[string]bool{}
	fits := func(items []string) bool {
		s := slices.Sorted(slices.Values(items))
		k := strings.Join(s, ",")
		if v, ok := memo[k]; ok {
			return v
		}
		_, ok := w.packs.pack(s, g, nil)
		memo[k] = ok
		return ok
	}
	total := 0
	for p := range paths {
		rng := rand.New(rand.NewPCG(uint64(p), 0x73697a65))
		var held []string
		for left := n; left > 0; {
			pi, j := w.event(rng, rho, len(held))
			if pi >= 0 {
				left--
				if next := append(slices.Clone(held), w.one.profs[pi].Name); fits(next) {
					held = next
					if w.large[pi] {
						total++
					}
				}
				continue
			}
			held = slices.Delete(held, j, j+1)
		}
	}
	return float64(total) / float64(paths)
}
