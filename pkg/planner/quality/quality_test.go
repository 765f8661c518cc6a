package quality

import (
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

func a100(t testing.TB) *mig.Model {
	t.Helper()
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallConfig runs in a few seconds: every strategy, both models.
func smallConfig() Config {
	c := DefaultConfig()
	c.Scenarios = []Scenario{
		{Name: "8gpu", GPUs: 8, GPUsPerNode: 4, Claims: 80, Seeds: 1, Models: []string{"loss", "queue"}},
		{Name: "2gpu", GPUs: 2, GPUsPerNode: 2, Claims: 12, Seeds: 2, Models: []string{"loss"}, Exact: true},
	}
	return c
}

// simulate runs one strategy on one trace and returns the finished sim.
func simulate(t *testing.T, name string, mix Mix, gpus, perNode, claims int, queue bool, seed uint64) *sim {
	t.Helper()
	cfg := DefaultConfig()
	m := a100(t)
	profiles := mixProfiles(cfg.Mixes)
	fs, err := newFeasibleSet(m, profiles)
	if err != nil {
		t.Fatal(err)
	}
	_, geoms := maximalLayouts(m, profiles)
	load := cfg.LossLoad
	if queue {
		load = cfg.QueueLoad
	}
	tr, err := genTrace(m, mix, gpus, claims, load, cfg.MeanHold, seed)
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{GPUs: gpus, GPUsPerNode: perNode}
	st, err := newStrategy(name, sc, geoms)
	if err != nil {
		t.Fatal(err)
	}
	var init []mig.Layout
	if name == Static {
		for range gpus {
			init = append(init, mig.MustParseLayout("3g.40gb@0,2g.20gb@4,1g.10gb@6"))
		}
	}
	s := newSim(m, tr, gpus, perNode, init, &cfg, queue, st, fs)
	if err := s.run(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestStrategiesKeepInvariants: no strategy but migrate ever destroys or
// moves an allocated device (the simulator refuses such a change and audits
// every claim's device when it leaves), and every served claim got a device
// of its profile at a valid placement.
func TestStrategiesKeepInvariants(t *testing.T) {
	for _, name := range []string{Miglayout, FirstFit, Nos, Static, Migrate, BestFit, Largest} {
		for _, queue := range []bool{false, true} {
			for _, mix := range DefaultMixes() {
				s := simulate(t, name, mix, 8, 4, 100, queue, 7)
				if name != Migrate && s.moved != 0 {
					t.Errorf("%s moved %d allocated devices", name, s.moved)
				}
				served := 0
				for _, c := range s.claims {
					if c.st != cRunning && c.st != cDone && c.st != cReserved {
						continue
					}
					served++
					if c.dev.Profile != c.profile {
						t.Errorf("%s: claim %d for %s got %s", name, c.id, c.profile, c.dev)
					}
					p, _ := s.model.Profile(c.profile)
					if !p.HasPlacement(mig.Placement{Start: c.dev.Start, Size: p.MemorySlices}) {
						t.Errorf("%s: claim %d got %s, not a placement of %s", name, c.id, c.dev, p.Name)
					}
				}
				if served == 0 {
					t.Errorf("%s served nothing", name)
				}
				for _, g := range s.gpus {
					if err := s.model.Validate(g.layout); err != nil {
						t.Errorf("%s: GPU %d ends with an invalid layout: %v", name, g.idx, err)
					}
				}
			}
		}
	}
}

// rogue destroys the first allocated device it sees.
type rogue struct{}

func (rogue) lock() bool     { return false }
func (rogue) migrates() bool { return false }
func (rogue) delay() bool    { return true }
func (rogue) decide(s *sim) error {
	if err := (firstFit{}).decide(s); err != nil {
		return err
	}
	for _, g := range s.gpus {
		if len(g.owner) > 0 {
			return s.change(g.idx, s.free(g), false)
		}
	}
	return nil
}

func TestSimRefusesDestroyingAllocatedDevices(t *testing.T) {
	m := a100(t)
	cfg := DefaultConfig()
	fs, _ := newFeasibleSet(m, mixProfiles(cfg.Mixes))
	tr, _ := genTrace(m, DefaultMixes()[0], 2, 20, 0.9, 3600, 1)
	s := newSim(m, tr, 2, 2, nil, &cfg, false, rogue{}, fs)
	if err := s.run(); !errors.Is(err, errDestroysAllocated) {
		t.Fatalf("a change destroying an allocated device: %v, want it refused as such", err)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	cfg := smallConfig()
	cfg.Parallel = 2
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Parallel = 1
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Traces, b.Traces) {
		t.Error("two runs with the same seed differ")
	}
	if a.String() == "" {
		t.Error("empty report")
	}
	cfg.Seed = 99
	c, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Traces, c.Traces) {
		t.Error("another seed gives the same traces")
	}
}

// TestBounds: free migration (d) serves at least as many large claims as
// every no-migration strategy, and the clairvoyant search at least as many
// as every no-migration strategy, (e) included, on the instances it solves,
// within a tolerance (both are greedy or relaxed in ways that make them
// bounds only approximately: (d) is online, the clairvoyant search serves
// instantly).
func TestBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Scenarios = []Scenario{
		{Name: "8gpu", GPUs: 8, GPUsPerNode: 8, Claims: 300, Seeds: 2, Models: []string{"loss"}},
		{Name: "2gpu", GPUs: 2, GPUsPerNode: 2, Claims: 16, Seeds: 4, Models: []string{"loss"}, Exact: true},
	}
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range cfg.Scenarios {
		for _, mix := range cfg.Mixes {
			bound, ok := rep.Row(sc.Name, mix.Name, "loss", Migrate)
			if !ok {
				t.Fatalf("%s/%s: no row of %s", sc.Name, mix.Name, Migrate)
			}
			for _, name := range []string{Miglayout, FirstFit, Nos, Static, BestFit, Largest} {
				r, ok := rep.Row(sc.Name, mix.Name, "loss", name)
				if !ok {
					t.Fatalf("%s/%s: no row of %s", sc.Name, mix.Name, name)
				}
				if tol := 0.05 * float64(r.NLarge); float64(bound.ServedLarge) < float64(r.ServedLarge)-tol {
					t.Errorf("%s/%s: migrate serves %d large claims, %s %d", sc.Name, mix.Name, bound.ServedLarge, name, r.ServedLarge)
				}
			}
		}
	}
	// The clairvoyant search against the others, (e) included, trace by trace.
	byTrace := map[[3]string]map[string]TraceResult{}
	for _, tr := range rep.Traces {
		if tr.Scenario != "2gpu" {
			continue
		}
		k := [3]string{tr.Mix, tr.Model, string(rune(tr.Seed))}
		if byTrace[k] == nil {
			byTrace[k] = map[string]TraceResult{}
		}
		byTrace[k][tr.Strategy] = tr
	}
	for k, m := range byTrace {
		ex := m[Clairvoyant]
		if ex.NA {
			continue
		}
		for name, tr := range m {
			if name == Clairvoyant || name == Migrate {
				continue
			}
			if ex.ServedLarge < tr.ServedLarge-1 {
				t.Errorf("%v: the clairvoyant search serves %d large claims, %s %d", k, ex.ServedLarge, name, tr.ServedLarge)
			}
		}
	}
}

// TestClairvoyantSearch: on one GPU, a 3g.40gb then a 4g.40gb claim: first-fit
// puts the 3g at slice 0, where the 4g must go; the clairvoyant search places the
// 3g at 4 and serves both.
func TestClairvoyantSearch(t *testing.T) {
	m := a100(t)
	tr := trace{claims: []claim{
		{id: 0, profile: "3g.40gb", large: true, arrive: 0, hold: 100},
		{id: 1, profile: "4g.40gb", large: true, arrive: 1, hold: 100},
	}}
	res, err := solveClairvoyant(m, tr, 1, 5, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.large != 2 || res.total != 2 {
		t.Errorf("the clairvoyant search serves %d large of %d, want 2 of 2", res.large, res.total)
	}
	cfg := DefaultConfig()
	fs, _ := newFeasibleSet(m, mixProfiles(cfg.Mixes))
	s := newSim(m, tr, 1, 1, nil, &cfg, false, firstFit{}, fs)
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if r := s.result(); r.servedLarge != 1 {
		t.Errorf("first-fit serves %d large claims, want 1", r.servedLarge)
	}
}

// TestClairvoyantSymmetry: the symmetry reduction does not change the optimum.
func TestClairvoyantSymmetry(t *testing.T) {
	m := a100(t)
	if n := len(slicePerms(m)); n < 2 {
		t.Fatalf("A100 has %d slice symmetries, want more than the identity", n)
	}
	for seed := range uint64(4) {
		for _, mix := range DefaultMixes() {
			tr, _ := genTrace(m, mix, 2, 12, 0.9, 3600, seed)
			a, err := solveClairvoyant(m, tr, 2, 60, 1_000_000)
			if err != nil {
				t.Fatal(err)
			}
			b, err := solveClairvoyantWith(m, tr, 2, 60, 1_000_000, false)
			if err != nil {
				t.Fatal(err)
			}
			if a.large != b.large || a.total != b.total {
				t.Errorf("%s seed %d: with symmetry %d/%d, without %d/%d", mix.Name, seed, a.large, a.total, b.large, b.total)
			}
		}
	}
}

// TestFeasibleSet: a multiset is feasible exactly when mig.Model.Fit places
// it on an empty GPU.
func TestFeasibleSet(t *testing.T) {
	m := a100(t)
	profiles := mixProfiles(DefaultMixes())
	fs, err := newFeasibleSet(m, profiles)
	if err != nil {
		t.Fatal(err)
	}
	var rec func(i int, want map[string]int)
	n := 0
	rec = func(i int, want map[string]int) {
		if i == len(profiles) {
			total := 0
			for _, k := range want {
				total += k
			}
			if total == 0 {
				return // Fit refuses an empty multiset
			}
			_, err := m.Fit(mig.FitRequest{Want: want})
			if got := fs.ok(want); got != (err == nil) {
				t.Errorf("%v: feasible set says %v, Fit says %v", want, got, err)
			}
			n++
			return
		}
		p, _ := m.Profile(profiles[i])
		for k := 0; k <= p.MaxCount; k++ {
			w := maps.Clone(want)
			w[profiles[i]] = k
			rec(i+1, w)
		}
	}
	rec(0, map[string]int{})
	if n < 100 {
		t.Errorf("checked %d multisets", n)
	}
	// pack: two 4g and a 7g need three GPUs.
	if _, ok := fs.pack([]string{"4g.40gb", "4g.40gb", "7g.80gb"}, 2, nil); ok {
		t.Error("packed two 4g.40gb and a 7g.80gb on two GPUs")
	}
	if bins, ok := fs.pack([]string{"4g.40gb", "3g.40gb", "3g.40gb", "4g.40gb"}, 2, nil); !ok || bins[0] == bins[3] {
		t.Errorf("pack of 4g,3g,3g,4g on two GPUs: %v %v", bins, ok)
	}
}

func TestTraceMix(t *testing.T) {
	m := a100(t)
	mix := DefaultMixes()[0]
	a, err := genTrace(m, mix, 16, 4000, 0.9, 3600, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := genTrace(m, mix, 16, 4000, 0.9, 3600, 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different traces")
	}
	count := map[string]int{}
	for i, c := range a.claims {
		count[c.profile]++
		if i > 0 && c.arrive < a.claims[i-1].arrive {
			t.Fatal("arrivals out of order")
		}
	}
	for p, w := range mix.Weights {
		if got := float64(count[p]) / 4000; math.Abs(got-w) > 0.03 {
			t.Errorf("%s: share %.3f, want %.2f", p, got, w)
		}
	}
	if got := slices.Sorted(maps.Keys(count)); len(got) != 5 {
		t.Errorf("profiles drawn: %v", got)
	}
}

func TestReportRendersEveryRow(t *testing.T) {
	rep, err := Run(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := rep.String()
	for _, l := range Labels {
		if !strings.Contains(out, l) {
			t.Errorf("report lacks %s", l)
		}
	}
	if len(rep.Ratios) != 2*len(DefaultMixes()) {
		t.Errorf("%d ratio rows", len(rep.Ratios))
	}
	if _, err := Run(Config{Model: "no-such-gpu"}); err == nil {
		t.Error("unknown model accepted")
	}
	bad := smallConfig()
	bad.Strategies = []string{"nope"}
	if _, err := Run(bad); err == nil {
		t.Error("unknown strategy accepted")
	}
}
