package quality

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TraceResult is one strategy on one trace.
type TraceResult struct {
	Scenario, Mix, Model, Strategy string
	Seed                           uint64
	// NA is set when the strategy does not apply ((e) and the clairvoyant
	// search in the queue model or on too large a cluster); Reason says why.
	NA                             bool
	Reason                         string
	N, Served, NLarge, ServedLarge int
	PerProfileN, PerProfileServed  map[string]int
	// Waits per profile in seconds (+Inf: never served), queue model.
	Waits              map[string][]float64
	Destroyed, Moved   int
	Changes, Decisions int
	Drops, DropsLocal  int
	DropsGlobal        int
	LargeDrops         int
	LargeDropsLocal    int
	LargeDropsGlobal   int
	// Static is the layout per GPU chosen by (c).
	Static []mig.Layout
	// ExactStates is the clairvoyant search's memo size.
	ExactStates int
	// Reward is (e′)'s reward per claim served (ExactAdmission).
	Reward float64 `json:",omitempty"`
}

type job struct {
	scen  Scenario
	mix   Mix
	model string
	seed  uint64
}

// Run simulates every scenario × mix × model × seed with every strategy and
// returns the report.
func Run(cfg Config) (Report, error) {
	began := time.Now()
	m, err := mig.DefaultCatalog().Model(cfg.Model)
	if err != nil {
		return Report{}, err
	}
	if len(cfg.Strategies) == 0 {
		cfg.Strategies = AllStrategies
	}
	for _, s := range cfg.Strategies {
		if _, ok := Labels[s]; !ok {
			return Report{}, fmt.Errorf("unknown strategy %q", s)
		}
	}
	if cfg.ExactStates == 0 {
		cfg.ExactStates = 500_000
	}
	if cfg.ExactValues == 0 {
		cfg.ExactValues = 5_000_000
	}
	if len(cfg.AdmissionRewards) == 0 {
		cfg.AdmissionRewards = DefaultAdmissionRewards
	}
	profiles := mixProfiles(cfg.Mixes)
	fs, err := newFeasibleSet(m, profiles)
	if err != nil {
		return Report{}, err
	}
	layouts, geoms := maximalLayouts(m, profiles)
	var initial mig.Layout
	if cfg.Initial != "" {
		if initial, err = mig.ParseLayout(cfg.Initial); err != nil {
			return Report{}, err
		}
		if err := m.Validate(initial); err != nil {
			return Report{}, err
		}
	}
	var jobs []job
	for _, sc := range cfg.Scenarios {
		if sc.GPUs <= 0 || sc.GPUsPerNode <= 0 || sc.GPUs%sc.GPUsPerNode != 0 {
			return Report{}, fmt.Errorf("scenario %s: %d GPUs is not a multiple of %d per node", sc.Name, sc.GPUs, sc.GPUsPerNode)
		}
		for _, mix := range cfg.Mixes {
			for _, model := range sc.Models {
				if model != "loss" && model != "queue" {
					return Report{}, fmt.Errorf("scenario %s: unknown model %q", sc.Name, model)
				}
				for k := range sc.Seeds {
					jobs = append(jobs, job{sc, mix, model, cfg.Seed + uint64(k)})
				}
			}
		}
	}
	out := make([][]TraceResult, len(jobs))
	errs := make([]error, len(jobs))
	par := cfg.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = runJob(&cfg, m, fs, layouts, geoms, initial, jobs[i])
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	rep := Report{Config: cfg, Profiles: profiles}
	for i, e := range errs {
		if e != nil {
			j := jobs[i]
			return Report{}, fmt.Errorf("scenario %s, mix %s, %s model, seed %d: %w", j.scen.Name, j.mix.Name, j.model, j.seed, e)
		}
		rep.Traces = append(rep.Traces, out[i]...)
	}
	rep.build()
	rep.Elapsed = time.Since(began)
	return rep, nil
}

func mixProfiles(mixes []Mix) []string {
	var out []string
	for _, mx := range mixes {
		for p := range mx.Weights {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// runJob runs every strategy on one trace.
func runJob(cfg *Config, m *mig.Model, fs *feasibleSet, layouts []mig.Layout, geoms []map[string]int, initial mig.Layout, j job) ([]TraceResult, error) {
	load := cfg.LossLoad
	queue := j.model == "queue"
	if queue {
		load = cfg.QueueLoad
	}
	tr, err := genTrace(m, j.mix, j.scen.GPUs, j.scen.Claims, load, cfg.MeanHold, j.seed)
	if err != nil {
		return nil, err
	}
	var init []mig.Layout
	if initial != nil {
		for range j.scen.GPUs {
			init = append(init, initial)
		}
	}
	var out []TraceResult
	for _, name := range cfg.Strategies {
		tr0 := TraceResult{Scenario: j.scen.Name, Mix: j.mix.Name, Model: j.model, Strategy: name, Seed: j.seed}
		switch name {
		case Clairvoyant:
			if why, skip := smallLossOnly(queue, j.scen); skip {
				tr0.NA, tr0.Reason = true, why
				break
			}
			res, err := solveClairvoyant(m, tr, j.scen.GPUs, cfg.Deadline, cfg.ExactStates)
			tr0.ExactStates = res.states
			if err != nil {
				tr0.NA, tr0.Reason = true, err.Error()
				break
			}
			tr0.N, tr0.Served, tr0.ServedLarge = len(tr.claims), res.total, res.large
			for _, c := range tr.claims {
				if c.large {
					tr0.NLarge++
				}
			}
		case Exact:
			dp, arrive, why := onlinePolicy(cfg, m, j, tr, queue, load)
			if why != "" {
				tr0.NA, tr0.Reason = true, why
				break
			}
			s := newSim(m, tr, j.scen.GPUs, j.scen.GPUsPerNode, init, cfg, queue, onlineStrategy{dp: dp, arrive: arrive}, fs)
			if err := s.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			fill(&tr0, s.result())
		case ExactAdmission:
			// One result per reward; the report keeps one reward's.
			dp, arrive, why := onlinePolicy(cfg, m, j, tr, queue, load)
			if why != "" {
				tr0.NA, tr0.Reason = true, why
				break
			}
			for _, reward := range cfg.AdmissionRewards {
				st := onlineStrategy{dp: dp, arrive: arrive, admission: true, reward: reward, value: dp.admissionValues(len(tr.claims), reward)}
				s := newSim(m, tr, j.scen.GPUs, j.scen.GPUsPerNode, init, cfg, queue, st, fs)
				if err := s.run(); err != nil {
					return nil, fmt.Errorf("%s, reward %g: %w", name, reward, err)
				}
				r := tr0
				r.Reward = reward
				fill(&r, s.result())
				out = append(out, r)
			}
			continue
		case Static:
			r, best, err := bestStatic(cfg, m, fs, tr, j.scen, queue, layouts)
			if err != nil {
				return nil, err
			}
			fill(&tr0, r)
			tr0.Static = best
		default:
			st, err := newStrategy(name, j.scen, geoms)
			if err != nil {
				return nil, err
			}
			s := newSim(m, tr, j.scen.GPUs, j.scen.GPUsPerNode, init, cfg, queue, st, fs)
			if err := s.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			fill(&tr0, s.result())
		}
		out = append(out, tr0)
	}
	return out, nil
}

// onlinePolicy is the optimal online policy of job j's trace tr, solved
// once per mix (solveOnline), for strategies (e) and (e′), and the claims'
// arrival times; why says why it does not apply to the job ("" where it
// does).
func onlinePolicy(cfg *Config, m *mig.Model, j job, tr trace, queue bool, load float64) (dp *onlineDP, arrive []float64, why string) {
	if why, skip := smallLossOnly(queue, j.scen); skip {
		return nil, nil, why
	}
	dp, err := solveOnline(m, j.mix, j.scen.GPUs, len(tr.claims), load, cfg.ExactValues)
	if err != nil {
		return nil, nil, err.Error()
	}
	for _, c := range tr.claims {
		arrive = append(arrive, c.arrive)
	}
	return dp, arrive, ""
}

// smallLossOnly says why (e) and the clairvoyant search do not run on a
// job of sc in the given model, if they do not: both are loss-model
// strategies for scenarios small enough to solve (Scenario.Exact).
func smallLossOnly(queue bool, sc Scenario) (string, bool) {
	switch {
	case queue:
		return "loss model only", true
	case !sc.Exact:
		return "not solved for this scenario", true
	}
	return "", false
}

func newStrategy(name string, sc Scenario, geoms []map[string]int) (strategy, error) {
	switch name {
	case Miglayout:
		return newMiglayout(sc.GPUs / sc.GPUsPerNode), nil
	case FirstFit:
		return firstFit{}, nil
	case BestFit:
		return bestFit{}, nil
	case Largest:
		return largestRange{}, nil
	case Nos:
		return nos{geoms: geoms}, nil
	case Migrate:
		return migrate{}, nil
	case Static:
		return static{}, nil
	}
	return nil, fmt.Errorf("unknown strategy %q", name)
}

func fill(t *TraceResult, r result) {
	t.N, t.Served, t.NLarge, t.ServedLarge = r.n, r.served, r.nLarge, r.servedLarge
	t.PerProfileN, t.PerProfileServed, t.Waits = r.perProfileN, r.perProfileServed, r.waits
	t.Destroyed, t.Moved, t.Changes, t.Decisions = r.destroyed, r.moved, r.changes, r.decisions
	t.Drops, t.DropsLocal, t.DropsGlobal = r.drops, r.dropsLocal, r.dropsGlobal
	t.LargeDrops, t.LargeDropsLocal, t.LargeDropsGlobal = r.largeDrops, r.largeDropsLocal, r.largeDropsGlobal
}

// bestStatic is strategy (c): the fixed layouts, chosen in hindsight on the
// trace, that serve the most claims (then the most large claims, then the
// least total wait): the best single maximal layout on every GPU, then
// improved GPU by GPU (two passes of coordinate descent over the maximal
// layouts).
func bestStatic(cfg *Config, m *mig.Model, fs *feasibleSet, tr trace, sc Scenario, queue bool, layouts []mig.Layout) (result, []mig.Layout, error) {
	eval := func(ls []mig.Layout) (result, error) {
		s := newSim(m, tr, sc.GPUs, sc.GPUsPerNode, ls, cfg, queue, static{}, fs)
		if err := s.run(); err != nil {
			return result{}, err
		}
		return s.result(), nil
	}
	score := func(r result) [3]float64 {
		w := 0.0
		for _, p := range slices.Sorted(maps.Keys(r.waits)) {
			for _, x := range r.waits[p] {
				if !math.IsInf(x, 1) {
					w += x
				}
			}
		}
		return [3]float64{float64(r.served), float64(r.servedLarge), -w}
	}
	betterScore := func(a, b [3]float64) bool {
		for i := range a {
			if a[i] != b[i] {
				return a[i] > b[i]
			}
		}
		return false
	}
	cur := make([]mig.Layout, sc.GPUs)
	var bestR result
	var bestS [3]float64
	first := true
	for _, l := range layouts {
		ls := make([]mig.Layout, sc.GPUs)
		for i := range ls {
			ls[i] = l
		}
		r, err := eval(ls)
		if err != nil {
			return result{}, nil, err
		}
		if s := score(r); first || betterScore(s, bestS) {
			bestR, bestS, cur, first = r, s, ls, false
		}
	}
	for range 2 {
		improved := false
		for gi := range sc.GPUs {
			for _, l := range layouts {
				if cur[gi].Equal(l) {
					continue
				}
				ls := slices.Clone(cur)
				ls[gi] = l
				r, err := eval(ls)
				if err != nil {
					return result{}, nil, err
				}
				if s := score(r); betterScore(s, bestS) {
					bestR, bestS, cur, improved = r, s, ls, true
				}
			}
		}
		if !improved {
			break
		}
	}
	return bestR, cur, nil
}
