package quality

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
)

// Report is the outcome of Run: one row per scenario × mix × model ×
// strategy (traces pooled), the ratios, and the known-fact checks.
type Report struct {
	Config   Config
	Profiles []string
	Traces   []TraceResult
	Rows     []Row
	Ratios   []Ratio
	Facts    []Fact
	Elapsed  time.Duration
}

// Row is a strategy's pooled outcome on a scenario, mix and model.
type Row struct {
	Scenario, Mix, Model, Strategy string
	// Traces pooled; Solved of them ((e) and the clairvoyant search only;
	// the others are n/a).
	Traces, Solved                 int
	NA                             bool
	Reason                         string
	N, Served, NLarge, ServedLarge int
	// P50 and P95 wait per profile, and over large profiles, in seconds
	// (+Inf where the percentile falls on a claim never served); queue
	// model only.
	P50, P95           map[string]float64
	P50Large, P95Large float64
	Destroyed, Moved   int
	Decisions          int
	Drops, DropsGlobal int
	DropsLocal         int
	LargeDrops         int
	LargeDropsLocal    int
	LargeDropsGlobal   int
	// Rewards are (e′)'s rewards per claim served, those the report kept
	// (chooseAdmissionReward): one per fold of traces that has traces,
	// even seeds' first; nil for the other strategies.
	Rewards []float64 `json:",omitempty"`
}

// ServedShare is the share of claims served.
func (r Row) ServedShare() float64 { return ratio(r.Served, r.N) }

// LargeShare is the share of large (3g and up) claims served.
func (r Row) LargeShare() float64 { return ratio(r.ServedLarge, r.NLarge) }

// DestroyedPerServed is devices destroyed per served claim.
func (r Row) DestroyedPerServed() float64 { return ratio(r.Destroyed, r.Served) }

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// Ratio holds the goals for one scenario and mix.
type Ratio struct {
	Scenario, Mix string
	// Bound is the strategy used as the best no-migration reference where
	// the scenario is solved exactly: (e′), the optimal online policy with
	// admission control, where it serves more large claims than (e) and at
	// least (a)'s share overall, else (e), the optimal online policy that
	// serves whenever a placement exists; elsewhere (d) migrate.
	// BoundRewards are (e′)'s rewards per claim where it is the bound,
	// one per fold of traces (chooseAdmissionReward).
	Bound        string
	BoundRewards []float64
	// Traces pooled.
	Traces int
	// Large served share, loss model: firstfit, miglayout, bound.
	FirstFitLarge, MiglayoutLarge, BoundLarge float64
	// GapClosed = (miglayout - firstfit) / (bound - firstfit); NaN when
	// the bound is not above firstfit. GapLow and GapHigh are its 95 %
	// bootstrap interval over the traces (gapInterval; NaN where there is
	// none).
	GapClosed, GapLow, GapHigh float64
	// MigrateLarge is (d)'s large served share, and ExactOfMigrateGap the
	// share of the gap between firstfit and (d) that the best no-migration
	// reference ((e) or (e′), Bound) closes: how far (d) is above what a
	// no-migration policy reaches (NaN where neither is solved).
	MigrateLarge, ExactOfMigrateGap float64
	// ClairvoyantLarge is the clairvoyant search's large served share on
	// the ClairvoyantTraces it solved, and GapClosedClairvoyant the gap
	// miglayout closes against it on those traces (NaN where not run).
	ClairvoyantLarge, GapClosedClairvoyant float64
	ClairvoyantTraces                      int
	// Served overall, miglayout over firstfit, per model (the goal is
	// judged on these pooled ratios); TracesServedLess of TracesCompared
	// traces (both models) are those on which miglayout served fewer
	// claims than firstfit.
	ServedRatioLoss, ServedRatioQueue float64
	TracesServedLess, TracesCompared  int
	// P95 wait of large claims in the queue model, miglayout over firstfit,
	// and both values (seconds).
	P95LargeRatio                 float64
	P95LargeMiglayout, P95LargeFF float64
	HasLoss, HasQueue             bool
}

// Goals reports which of the three goals the ratio meets.
func (r Ratio) Goals() (gap, served, wait bool) {
	gap = r.Bound != "" && (!math.IsNaN(r.GapClosed) && r.GapClosed >= 0.5 || math.IsNaN(r.GapClosed) && r.MiglayoutLarge >= r.FirstFitLarge)
	served = (!r.HasLoss || r.ServedRatioLoss >= 1) && (!r.HasQueue || r.ServedRatioQueue >= 1)
	wait = !r.HasQueue || r.P95LargeRatio <= 0.5
	return
}

// Fact is the check of the known fact on one scenario and mix (loss
// model): the local best-fit rule against first-fit on large claims, and
// how many of first-fit's losses moving running instances would have
// avoided at the moment of loss.
type Fact struct {
	Scenario, Mix                  string
	FirstFitLarge, BestFitLarge    float64
	LargestRangeLarge              float64
	MiglayoutLarge                 float64
	FirstFitDrops                  int
	DropsLocal, DropsGlobal        int
	LargeDrops                     int
	LargeDropsLocal, LargeDropsGlb int
}

type rowKey struct{ scen, mix, model, strat string }

func (rep *Report) build() {
	groups := map[rowKey][]TraceResult{}
	var keys []rowKey
	for _, t := range rep.Traces {
		k := rowKey{t.Scenario, t.Mix, t.Model, t.Strategy}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	rewards := chooseAdmissionReward(groups)
	for _, k := range keys {
		r := pool(k, groups[k], nil)
		r.Rewards = rewards[k]
		rep.Rows = append(rep.Rows, r)
	}
	rep.ratios(groups, rewards)
}

// chooseAdmissionReward keeps, in groups, one reward's traces of each (e′)
// row (ExactAdmission traces come one per reward), choosing the reward by
// cross-fitting: the traces are split in two folds by seed parity, and each
// fold's traces are those of the reward chosen on the other fold
// (bestAdmissionReward), so that no trace's reference is picked on that
// trace (a choice made on the traces it is scored on would put the
// reference above what the policy serves on traces it has not seen). With
// one fold only (a single seed), the reward is chosen on it, in sample
// (rewardsText says so). It returns the rewards kept per row, one per fold
// with traces, the even fold's first.
func chooseAdmissionReward(groups map[rowKey][]TraceResult) map[rowKey][]float64 {
	chosen := map[rowKey][]float64{}
	for k, ts := range groups {
		if k.strat != ExactAdmission {
			continue
		}
		fold := func(t TraceResult) int { return int(t.Seed % 2) }
		var folds [2][]TraceResult
		for _, t := range ts {
			folds[fold(t)] = append(folds[fold(t)], t)
		}
		var ff [2][]TraceResult
		for _, t := range groups[rowKey{k.scen, k.mix, k.model, FirstFit}] {
			ff[fold(t)] = append(ff[fold(t)], t)
		}
		var kept []TraceResult
		var rewards []float64
		for f := range 2 {
			if len(folds[f]) == 0 {
				continue
			}
			other := 1 - f
			if len(folds[other]) == 0 {
				other = f
			}
			reward := bestAdmissionReward(k, folds[other], ff[other])
			rewards = append(rewards, reward)
			for _, t := range folds[f] {
				if t.Reward == reward {
					kept = append(kept, t)
				}
			}
		}
		groups[k] = kept
		chosen[k] = rewards
	}
	return chosen
}

// bestAdmissionReward is the reward, among those of the (e′) traces ts,
// whose policy serves the most large claims, pooled, among those that
// serve at least (a) firstfit's share of claims overall on the same traces
// ff (the "never serve less overall than (a)", asked of the
// reference too); the larger reward among equals. Where none does, the one
// that serves the most overall.
func bestAdmissionReward(k rowKey, ts, ff []TraceResult) float64 {
	byReward := map[float64][]TraceResult{}
	for _, t := range ts {
		byReward[t.Reward] = append(byReward[t.Reward], t)
	}
	ffShare := math.NaN()
	if len(ff) > 0 {
		ffShare = pool(rowKey{k.scen, k.mix, k.model, FirstFit}, ff, nil).ServedShare()
	}
	best, bestFeasible := math.NaN(), false
	var bestRow Row
	for _, reward := range slices.Sorted(maps.Keys(byReward)) {
		r := pool(k, byReward[reward], nil)
		feasible := !r.NA && (math.IsNaN(ffShare) || r.ServedShare() >= ffShare)
		better := false
		switch {
		case math.IsNaN(best):
			better = true
		case feasible != bestFeasible:
			better = feasible
		case feasible:
			better = r.LargeShare() >= bestRow.LargeShare()
		default:
			better = r.ServedShare() >= bestRow.ServedShare()
		}
		if better {
			best, bestFeasible, bestRow = reward, feasible, r
		}
	}
	return best
}

// pool sums traces; only the seeds in keep when keep is not nil.
func pool(k rowKey, ts []TraceResult, keep map[uint64]bool) Row {
	r := Row{Scenario: k.scen, Mix: k.mix, Model: k.model, Strategy: k.strat, P50: map[string]float64{}, P95: map[string]float64{}}
	waits := map[string][]float64{}
	var large []float64
	for _, t := range ts {
		if keep != nil && !keep[t.Seed] {
			continue
		}
		r.Traces++
		if t.NA {
			r.Reason = t.Reason
			continue
		}
		r.Solved++
		r.N += t.N
		r.Served += t.Served
		r.NLarge += t.NLarge
		r.ServedLarge += t.ServedLarge
		r.Destroyed += t.Destroyed
		r.Moved += t.Moved
		r.Decisions += t.Decisions
		r.Drops += t.Drops
		r.DropsLocal += t.DropsLocal
		r.DropsGlobal += t.DropsGlobal
		r.LargeDrops += t.LargeDrops
		r.LargeDropsLocal += t.LargeDropsLocal
		r.LargeDropsGlobal += t.LargeDropsGlobal
		for p, ws := range t.Waits {
			waits[p] = append(waits[p], ws...)
		}
	}
	r.NA = r.Solved == 0
	for p, ws := range waits {
		r.P50[p], r.P95[p] = percentile(ws, 0.5), percentile(ws, 0.95)
		if pp, err := mig.ParseProfileName(p); err == nil && pp.ComputeSlices >= 3 {
			large = append(large, ws...)
		}
	}
	r.P50Large, r.P95Large = percentile(large, 0.5), percentile(large, 0.95)
	return r
}

// percentile is the nearest-rank percentile; NaN for no data.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (rep *Report) ratios(groups map[rowKey][]TraceResult, rewards map[rowKey][]float64) {
	for _, sc := range rep.Config.Scenarios {
		for _, mix := range rep.Config.Mixes {
			ra := Ratio{Scenario: sc.Name, Mix: mix.Name, GapClosed: math.NaN(), GapLow: math.NaN(), GapHigh: math.NaN(), ServedRatioLoss: math.NaN(), ServedRatioQueue: math.NaN(), P95LargeRatio: math.NaN(),
				MigrateLarge: math.NaN(), ExactOfMigrateGap: math.NaN(), ClairvoyantLarge: math.NaN(), GapClosedClairvoyant: math.NaN()}
			get := func(model, strat string, keep map[uint64]bool) (Row, bool) {
				ts, ok := groups[rowKey{sc.Name, mix.Name, model, strat}]
				if !ok {
					return Row{}, false
				}
				return pool(rowKey{sc.Name, mix.Name, model, strat}, ts, keep), true
			}
			ff, ok1 := get("loss", FirstFit, nil)
			ml, ok2 := get("loss", Miglayout, nil)
			if ok1 && ok2 {
				ra.HasLoss, ra.Traces = true, ff.Traces
				ra.FirstFitLarge, ra.MiglayoutLarge = ff.LargeShare(), ml.LargeShare()
				ra.ServedRatioLoss = ratio(ml.Served, ff.Served)
				if b, ok := get("loss", Migrate, nil); ok {
					ra.Bound, ra.BoundLarge, ra.MigrateLarge = Migrate, b.LargeShare(), b.LargeShare()
				}
				if b, ok := get("loss", Exact, nil); ok && sc.Exact && !b.NA && b.Solved == b.Traces {
					ra.Bound, ra.BoundLarge = Exact, b.LargeShare()
					k := rowKey{sc.Name, mix.Name, "loss", ExactAdmission}
					if a, ok := get("loss", ExactAdmission, nil); ok && !a.NA && a.Solved == a.Traces && a.ServedShare() >= ff.ServedShare() && a.LargeShare() > b.LargeShare() {
						ra.Bound, ra.BoundLarge, ra.BoundRewards = ExactAdmission, a.LargeShare(), rewards[k]
					}
					if ra.MigrateLarge > ra.FirstFitLarge {
						ra.ExactOfMigrateGap = (ra.BoundLarge - ra.FirstFitLarge) / (ra.MigrateLarge - ra.FirstFitLarge)
					}
				}
			}
			if cv, ok := groups[rowKey{sc.Name, mix.Name, "loss", Clairvoyant}]; ok && ra.HasLoss {
				keep := map[uint64]bool{}
				for _, t := range cv {
					if !t.NA {
						keep[t.Seed] = true
					}
				}
				b, _ := get("loss", Clairvoyant, keep)
				ff, _ := get("loss", FirstFit, keep)
				ml, _ := get("loss", Miglayout, keep)
				if len(keep) > 0 {
					ra.ClairvoyantTraces, ra.ClairvoyantLarge = len(keep), b.LargeShare()
					if b.LargeShare() > ff.LargeShare() {
						ra.GapClosedClairvoyant = (ml.LargeShare() - ff.LargeShare()) / (b.LargeShare() - ff.LargeShare())
					}
				}
			}
			if ra.HasLoss && ra.BoundLarge > ra.FirstFitLarge {
				ra.GapClosed = (ra.MiglayoutLarge - ra.FirstFitLarge) / (ra.BoundLarge - ra.FirstFitLarge)
				key := func(strat string) []TraceResult { return groups[rowKey{sc.Name, mix.Name, "loss", strat}] }
				ra.GapLow, ra.GapHigh = gapInterval(key(FirstFit), key(Miglayout), key(ra.Bound))
			}
			for _, model := range []string{"loss", "queue"} {
				less, n := servedLess(groups[rowKey{sc.Name, mix.Name, model, FirstFit}], groups[rowKey{sc.Name, mix.Name, model, Miglayout}])
				ra.TracesServedLess += less
				ra.TracesCompared += n
			}
			ffq, ok1 := get("queue", FirstFit, nil)
			mlq, ok2 := get("queue", Miglayout, nil)
			if ok1 && ok2 {
				ra.HasQueue = true
				ra.ServedRatioQueue = ratio(mlq.Served, ffq.Served)
				ra.P95LargeMiglayout, ra.P95LargeFF = mlq.P95Large, ffq.P95Large
				switch {
				case mlq.P95Large == ffq.P95Large:
					ra.P95LargeRatio = 1
				case ffq.P95Large == 0:
					ra.P95LargeRatio = math.Inf(1)
				default:
					ra.P95LargeRatio = mlq.P95Large / ffq.P95Large
				}
			}
			if ra.HasLoss || ra.HasQueue {
				rep.Ratios = append(rep.Ratios, ra)
			}
			if ff, ok := get("loss", FirstFit, nil); ok {
				f := Fact{Scenario: sc.Name, Mix: mix.Name, FirstFitLarge: ff.LargeShare(), BestFitLarge: math.NaN(), LargestRangeLarge: math.NaN(), MiglayoutLarge: math.NaN()}
				if r, ok := get("loss", BestFit, nil); ok {
					f.BestFitLarge = r.LargeShare()
				}
				if r, ok := get("loss", Largest, nil); ok {
					f.LargestRangeLarge = r.LargeShare()
				}
				if r, ok := get("loss", Miglayout, nil); ok {
					f.MiglayoutLarge = r.LargeShare()
				}
				f.FirstFitDrops, f.DropsLocal, f.DropsGlobal = ff.Drops, ff.DropsLocal, ff.DropsGlobal
				f.LargeDrops, f.LargeDropsLocal, f.LargeDropsGlb = ff.LargeDrops, ff.LargeDropsLocal, ff.LargeDropsGlobal
				rep.Facts = append(rep.Facts, f)
			}
		}
	}
}

// Row returns the pooled row, if any.
func (rep *Report) Row(scen, mix, model, strat string) (Row, bool) {
	for _, r := range rep.Rows {
		if r.Scenario == scen && r.Mix == mix && r.Model == model && r.Strategy == strat {
			return r, true
		}
	}
	return Row{}, false
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

func dur(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.IsInf(x, 1):
		return "∞"
	case x < 100:
		return fmt.Sprintf("%.0fs", x)
	case x < 6000:
		return fmt.Sprintf("%.0fm", x/60)
	default:
		return fmt.Sprintf("%.1fh", x/3600)
	}
}

func num(x float64, f string) string {
	if math.IsNaN(x) {
		return "-"
	}
	if math.IsInf(x, 1) {
		return "∞"
	}
	return fmt.Sprintf(f, x)
}

// String renders the table, the ratios and the fact checks.
func (rep Report) String() string {
	var b strings.Builder
	c := rep.Config
	start := "with no device"
	if c.Initial != "" {
		start = "as " + c.Initial
	}
	fmt.Fprintf(&b, "Plan quality on seeded synthetic traces: %s, MIG on, GPUs start %s; Poisson arrivals, exponential holds of mean %s; repartition %s; loss deadline %s; load %.2f (loss) / %.2f (queue) of capacity; seed %d.\n",
		c.Model, start, dur(c.MeanHold), dur(c.Repartition), dur(c.Deadline), c.LossLoad, c.QueueLoad, c.Seed)
	limits := "GPUs changing at once: every GPU of a node"
	if c.MaxGPUsPerNode > 0 {
		limits = fmt.Sprintf("GPUs changing at once: %d per node", c.MaxGPUsPerNode)
	}
	if c.MaxGPUs > 0 {
		limits += fmt.Sprintf(", %d in the cluster", c.MaxGPUs)
	} else {
		limits += ", no cluster-wide limit"
	}
	reclaim := "idle GPUs not given back"
	if c.ReclaimIdleAfter > 0 {
		reclaim = "idle GPUs given back whole after " + dur(c.ReclaimIdleAfter)
	}
	fmt.Fprintf(&b, "  miglayout: %s (the controller's defaults: 1 per node, 8 per MigLayout); %s.\n", limits, reclaim)
	for _, sc := range c.Scenarios {
		fmt.Fprintf(&b, "  scenario %s: %d GPUs (%d per node), %d claims per trace, %d trace(s) per mix and model, models %s\n",
			sc.Name, sc.GPUs, sc.GPUsPerNode, sc.Claims, sc.Seeds, strings.Join(sc.Models, ", "))
	}
	for _, mx := range c.Mixes {
		var parts []string
		for _, p := range rep.Profiles {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", p, 100*mx.Weights[p]))
		}
		fmt.Fprintf(&b, "  mix %s: %s\n", mx.Name, strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"scenario", "mix", "model", "strategy", "served", "large"}
	for _, p := range rep.Profiles {
		head = append(head, "wait "+strings.SplitN(p, ".", 2)[0]+" p50/p95")
	}
	head = append(head, "large p95", "destroyed/served", "moved", "")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	prev := ""
	for _, r := range rep.Rows {
		group := r.Scenario + r.Mix + r.Model
		if prev != "" && group != prev {
			fmt.Fprintln(tw, strings.Repeat("\t", len(head)))
		}
		prev = group
		cells := []string{r.Scenario, r.Mix, r.Model, Labels[r.Strategy]}
		if r.NA {
			cells = append(cells, "n/a", "n/a")
			for range rep.Profiles {
				cells = append(cells, "")
			}
			cells = append(cells, "", "", "", r.Reason)
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
			continue
		}
		cells = append(cells, pct(r.ServedShare()), pct(r.LargeShare()))
		for _, p := range rep.Profiles {
			if r.Model != "queue" {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, dur(r.P50[p])+"/"+dur(r.P95[p]))
		}
		large := "-"
		if r.Model == "queue" {
			large = dur(r.P95Large)
		}
		var notes []string
		if r.Strategy == ExactAdmission && !r.NA {
			notes = append(notes, rewardsText(r.Rewards))
		}
		if r.Solved < r.Traces {
			notes = append(notes, fmt.Sprintf("solved %d/%d", r.Solved, r.Traces))
		}
		note := strings.Join(notes, ", ")
		destr, moved := num(r.DestroyedPerServed(), "%.2f"), fmt.Sprint(r.Moved)
		if r.Strategy == Clairvoyant {
			destr, moved = "-", "-"
		}
		cells = append(cells, large, destr, moved, note)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	b.WriteString("\n*  (c) best fixed layouts chosen in hindsight per trace (best uniform maximal layout, then GPU-by-GPU improvement).\n")
	b.WriteString("†  (d) moves running instances (instant, no repartition delay): a bound no real system may use; 'moved' counts migrated instances.\n")
	b.WriteString("§  (e) the optimal online policy, solved exactly by dynamic programming over the GPUs' allocated devices: knows the arrival rate, the mix and the mean hold, not the trace; serves whenever a placement exists, never moves an allocated device, instant service: the best such policy can do in expectation (solved for claims lost when they do not fit at once, played with the deadline; loss model, small clusters only).\n")
	b.WriteString("¶  (e′) (e) that may also turn a claim away while a placement exists (admission control), solved for a reward of 1 per large claim served plus a reward per claim served; the reward kept serves the most large claims among those serving at least (a)'s share overall, chosen by cross-fitting: on the odd seeds' traces for the even ones' and the other way round (its column 'rewards', even seeds' first), so that no trace's reference is chosen on that trace; a claim turned away stays pending while its deadline lasts.\n")
	b.WriteString("‡  clairvoyant search over placement choices, knowing every arrival and hold of the trace, serving whenever a placement exists, instant service: a relaxation of (e) no policy that serves whenever it can may reach; one that turns claims away, as (e′) does, is not bounded by it (loss model, small instances only).\n")
	b.WriteString("   served/large: share of claims (of 3g/4g/7g claims) given a device (loss: given one within the deadline, which may be usable only once its change is done; queue: before the run ends, else wait ∞).\n")

	b.WriteString("\nGoals (miglayout vs (a) firstfit):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmix\tbound\tlarge (a)\tlarge miglayout\tlarge bound\tgap closed (≥50%) [95% interval]\tserved ratio loss (≥1)\tserved ratio queue (≥1)\ttraces served < (a)\tlarge p95 (a)\tlarge p95 miglayout\tp95 ratio (≤0.5)\tmet\t")
	for _, r := range rep.Ratios {
		gap, served, wait := r.Goals()
		met := []string{}
		for _, g := range []struct {
			ok, applies bool
			name        string
		}{{gap, r.HasLoss, "gap"}, {served, true, "served"}, {wait, r.HasQueue, "wait"}} {
			if !g.applies {
				continue
			}
			if g.ok {
				met = append(met, g.name)
			} else {
				met = append(met, "NOT "+g.name)
			}
		}
		bound := Labels[r.Bound]
		if r.Bound == ExactAdmission {
			bound += " " + rewardsText(r.BoundRewards)
		}
		p95ff, p95ml := "-", "-"
		if r.HasQueue {
			p95ff, p95ml = dur(r.P95LargeFF), dur(r.P95LargeMiglayout)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Mix, bound,
			pct(r.FirstFitLarge), pct(r.MiglayoutLarge), pct(r.BoundLarge), gapText(r), num(r.ServedRatioLoss, "%.3f"), num(r.ServedRatioQueue, "%.3f"),
			r.TracesServedLess, r.TracesCompared, p95ff, p95ml, num(r.P95LargeRatio, "%.2f"), strings.Join(met, ", "))
	}
	tw.Flush()

	var bounds []Ratio
	for _, r := range rep.Ratios {
		if r.Bound == Exact || r.Bound == ExactAdmission || !math.IsNaN(r.ClairvoyantLarge) {
			bounds = append(bounds, r)
		}
	}
	if len(bounds) > 0 {
		b.WriteString("\nBounds (loss model, large claims served): where (e) is solved, the share of the gap between (a) and (d) migrate that the best no-migration policy solved ((e) or (e′), the goals' bound) itself closes, and the gap miglayout closes against the clairvoyant search:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tmix\tlarge (a)\tlarge miglayout\tlarge bound\tlarge (d) migrate\tbound closes of (a)→(d)\tlarge clairvoyant\tgap closed vs clairvoyant\t")
		for _, r := range bounds {
			ex := math.NaN()
			if r.Bound == Exact || r.Bound == ExactAdmission {
				ex = r.BoundLarge
			}
			cv := pct(r.ClairvoyantLarge)
			if r.ClairvoyantTraces > 0 && r.ClairvoyantTraces < r.Traces {
				cv += fmt.Sprintf(" (%d traces)", r.ClairvoyantTraces)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Mix, pct(r.FirstFitLarge), pct(r.MiglayoutLarge), pct(ex), pct(r.MigrateLarge),
				pct(r.ExactOfMigrateGap), cv, pct(r.GapClosedClairvoyant))
		}
		tw.Flush()
	}

	if len(rep.Facts) > 0 {
		b.WriteString("\nKnown fact (loss model): greedy \"keep the largest free range\" rules vs first-fit on large claims (bestfit: least headroom lost cluster-wide; largestrange: most headroom left on the GPU used, the planner's tie-break); first-fit losses that moving running instances would have avoided at the moment of loss:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tmix\tlarge (a) firstfit\tlarge bestfit\tlarge largestrange\tlarge miglayout\t(a) losses\tavoidable by moving within one GPU\tby moving across GPUs\t(a) large losses\twithin one GPU\tacross GPUs\t")
		for _, f := range rep.Facts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t\n", f.Scenario, f.Mix, pct(f.FirstFitLarge), pct(f.BestFitLarge), pct(f.LargestRangeLarge), pct(f.MiglayoutLarge),
				f.FirstFitDrops, pct(ratio(f.DropsLocal, f.FirstFitDrops)), pct(ratio(f.DropsGlobal, f.FirstFitDrops)),
				f.LargeDrops, pct(ratio(f.LargeDropsLocal, f.LargeDrops)), pct(ratio(f.LargeDropsGlb, f.LargeDrops)))
		}
		tw.Flush()
	}
	fmt.Fprintf(&b, "\n(%d traces in %s)\n", countTraces(rep), rep.Elapsed.Round(time.Millisecond))
	return b.String()
}

func gapText(r Ratio) string {
	if !r.HasLoss {
		return "-"
	}
	if r.Bound == "" {
		return "no reference"
	}
	if math.IsNaN(r.GapClosed) {
		return "no gap"
	}
	if math.IsNaN(r.GapLow) {
		return pct(r.GapClosed)
	}
	return fmt.Sprintf("%s [%.0f–%.0f%%]", pct(r.GapClosed), 100*r.GapLow, 100*r.GapHigh)
}

func countTraces(rep Report) int {
	seen := map[string]bool{}
	for _, t := range rep.Traces {
		seen[fmt.Sprint(t.Scenario, t.Mix, t.Model, t.Seed)] = true
	}
	return len(seen)
}

// rewardsText names (e′)'s rewards kept, one per fold of traces.
func rewardsText(rewards []float64) string {
	parts := make([]string, len(rewards))
	for i, r := range rewards {
		parts[i] = fmt.Sprintf("%g", r)
	}
	if len(parts) == 1 {
		return "reward " + parts[0] + " (one fold: chosen in sample)"
	}
	return "rewards " + strings.Join(parts, "/")
}
