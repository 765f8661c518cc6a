package quality

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestRunRefusesScenariosNotSplitIntoNodes: a scenario's GPUs must fill
// whole nodes.
func TestRunRefusesScenariosNotSplitIntoNodes(t *testing.T) {
	for name, sc := range map[string]Scenario{
		"3 GPUs, 2 per node": {Name: "odd", GPUs: 3, GPUsPerNode: 2, Claims: 4, Seeds: 1, Models: []string{"loss"}},
		"no GPUs":            {Name: "none", GPUs: 0, GPUsPerNode: 2, Claims: 4, Seeds: 1, Models: []string{"loss"}},
	} {
		cfg := DefaultConfig()
		cfg.Scenarios = []Scenario{sc}
		if _, err := Run(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRunTracesPerSeed: each seed of a scenario is its own trace, seen alike
// by every strategy: the clairvoyant search counts the same claims and
// large claims as first-fit on it.
func TestRunTracesPerSeed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Strategies = []string{FirstFit, Clairvoyant}
	cfg.Scenarios = []Scenario{{Name: "1gpu", GPUs: 1, GPUsPerNode: 1, Claims: 8, Seeds: 2, Models: []string{"loss"}, Exact: true}}
	cfg.Mixes = DefaultMixes()[:1]
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]map[uint64][2]int{}
	for _, tr := range rep.Traces {
		if tr.NA {
			t.Fatalf("%s seed %d not solved: %s", tr.Strategy, tr.Seed, tr.Reason)
		}
		if counts[tr.Strategy] == nil {
			counts[tr.Strategy] = map[uint64][2]int{}
		}
		counts[tr.Strategy][tr.Seed] = [2]int{tr.N, tr.NLarge}
	}
	ff := counts[FirstFit]
	if len(ff) != 2 {
		t.Fatalf("first-fit traces by seed %v, want 2 seeds", ff)
	}
	if ff[cfg.Seed][1] == 0 {
		t.Fatalf("seed %d draws no large claim", cfg.Seed)
	}
	if diff := cmp.Diff(ff, counts[Clairvoyant]); diff != "" {
		t.Errorf("claims and large claims per seed, first-fit (-) and clairvoyant (+):\n%s", diff)
	}
}

// TestBestStaticBeatsEveryUniformLayout: the fixed layouts (c) chooses in
// hindsight score at least as well as each maximal layout used on every
// GPU: more claims served, then more large claims, then less total wait.
func TestBestStaticBeatsEveryUniformLayout(t *testing.T) {
	m := a100(t)
	cfg := DefaultConfig()
	fs := testFeasible(t, m)
	layouts, _ := maximalLayouts(m, mixProfiles(cfg.Mixes))
	for _, mix := range DefaultMixes() {
		for seed := range uint64(10) {
			checkBestStatic(t, m, &cfg, fs, layouts, mix, seed)
		}
	}
}

// checkBestStatic compares (c)'s choice on one 1-GPU queue-model trace with
// every maximal layout.
func checkBestStatic(t *testing.T, m *mig.Model, cfg *Config, fs *feasibleSet, layouts []mig.Layout, mix Mix, seed uint64) {
	t.Helper()
	sc := Scenario{GPUs: 1, GPUsPerNode: 1}
	type score struct {
		served, large int
		wait          float64
	}
	scoreOf := func(r result) score {
		s := score{served: r.served, large: r.servedLarge}
		for _, ws := range r.waits {
			for _, w := range ws {
				if !math.IsInf(w, 1) {
					s.wait += w
				}
			}
		}
		return s
	}
	tr, err := genTrace(m, mix, 1, 8, cfg.QueueLoad, cfg.MeanHold, seed)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := bestStatic(cfg, m, fs, tr, sc, true, layouts)
	if err != nil {
		t.Fatal(err)
	}
	best := scoreOf(r)
	for _, l := range layouts {
		s := newSim(m, tr, 1, 1, []mig.Layout{l}, cfg, true, static{}, fs)
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		got := scoreOf(s.result())
		if got.served > best.served || got.served == best.served && (got.large > best.large || got.large == best.large && got.wait < best.wait) {
			t.Errorf("%s seed %d: %s scores %+v, better than the chosen layouts' %+v", mix.Name, seed, l, got, best)
		}
	}
}
