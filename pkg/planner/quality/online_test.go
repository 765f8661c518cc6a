package quality

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// emptyValue is the policy value from an empty cluster with n arrivals left.
func emptyValue(dp *onlineDP, value [][]float64, n int) float64 {
	return value[n][dp.tupleID[tupleKey(make([]int, dp.gpus))]]
}

// TestExactClosedForm: one GPU and only 7g.80gb claims. The first claim is
// served; the second is served only if the first has left before it
// arrives, which happens with probability 1/(ρ+1).
func TestExactClosedForm(t *testing.T) {
	m := a100(t)
	mix := Mix{Name: "7g", Weights: map[string]float64{"7g.80gb": 1}}
	dp, err := newOnlineDP(m, mix, 1, 3, 0.9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rho := 0.9 // load × GPUs / mean weight (a 7g weighs one GPU)
	if math.Abs(dp.rho-rho) > 1e-12 {
		t.Fatalf("ρ = %g, want %g", dp.rho, rho)
	}
	r := 1 + onlineEpsilon
	q := 1 / (rho + 1)
	want := map[int]float64{
		1: r,
		2: r * (1 + q),
		// third: served if the GPU is empty when it arrives; after the
		// second arrival the GPU is full either way.
		3: r * (1 + q + q),
	}
	for n, w := range want {
		if got := emptyValue(dp, dp.value, n); math.Abs(got-w) > 1e-12 {
			t.Errorf("V(%d, empty) = %.12f, want %.12f", n, got, w)
		}
	}
	if len(dp.states) != 2 {
		t.Errorf("%d GPU states for 7g only, want 2 (empty, full)", len(dp.states))
	}
}

// TestExactDominates: the optimal policy's value is at least that of fixed
// placement rules (first, last, an arbitrary one) in every cluster state,
// and strictly above them from the empty cluster for every default mix:
// where a claim goes matters, and the solver finds it.
func TestExactDominates(t *testing.T) {
	m := a100(t)
	const n = 12
	rules := map[string]func(c, pi int, next []int) int{
		"first":     func(c, pi int, next []int) int { return 0 },
		"last":      func(c, pi int, next []int) int { return len(next) - 1 },
		"arbitrary": func(c, pi int, next []int) int { return (c*31 + pi*7) % len(next) },
	}
	for _, mix := range DefaultMixes() {
		dp, err := newOnlineDP(m, mix, 2, n, 0.9, 5_000_000)
		if err != nil {
			t.Fatal(err)
		}
		for name, rule := range rules {
			v := dp.values(n, rule)
			for k := range v {
				for c := range v[k] {
					if v[k][c] > dp.value[k][c]+1e-9 {
						t.Fatalf("%s: rule %s worth %g > optimal %g in state %v with %d left", mix.Name, name, v[k][c], dp.value[k][c], dp.tuples[c], k)
					}
				}
			}
			if opt, got := emptyValue(dp, dp.value, n), emptyValue(dp, v, n); opt < got+1e-3 {
				t.Errorf("%s: optimal %.4f large claims, rule %s %.4f: want the optimum strictly better", mix.Name, opt, name, got)
			}
		}
	}
}

// TestExactSimulated: played on traces in the simulator, with claims
// dropped at once where they do not fit, the policy serves on average the
// number of large claims its value function promises (within four standard
// errors): the simulator and the solver agree on the arrival rate, the mix
// and the policy.
func TestExactSimulated(t *testing.T) {
	mean, se, want := simulateOnline(t, DefaultMixes()[1], onlineEpsilon, false)
	if math.Abs(mean-want) > 4*se {
		t.Errorf("simulated policy serves %.3f large claims per trace, value function says %.3f (standard error %.3f)", mean, want, se)
	}
}

// simulateOnline plays the optimal online policy of mix on 2 GPUs (with
// admission control for reward, admission set; else (e)) on 3000 traces of
// 10 claims, with claims dropped at once where they are not placed (as the
// solver assumes), and returns the mean reward per trace (large claims
// served plus reward per claim served), its standard error, and what the
// value function promises from an empty cluster.
func simulateOnline(t *testing.T, mix Mix, reward float64, admission bool) (mean, se, want float64) {
	t.Helper()
	m := a100(t)
	const n, traces = 10, 3000
	cfg := DefaultConfig()
	cfg.Deadline = 1e-9
	fs, err := newFeasibleSet(m, mixProfiles(cfg.Mixes))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := newOnlineDP(m, mix, 2, n, cfg.LossLoad, cfg.ExactValues)
	if err != nil {
		t.Fatal(err)
	}
	value := dp.value
	if admission {
		value = dp.admissionValues(n, reward)
	}
	want = emptyValue(dp, value, n)
	sum, sq := 0.0, 0.0
	for seed := range uint64(traces) {
		tr, err := genTrace(m, mix, 2, n, cfg.LossLoad, cfg.MeanHold, seed)
		if err != nil {
			t.Fatal(err)
		}
		var arrive []float64
		for _, c := range tr.claims {
			arrive = append(arrive, c.arrive)
		}
		st := onlineStrategy{dp: dp, arrive: arrive}
		if admission {
			st.admission, st.reward, st.value = true, reward, value
		}
		s := newSim(m, tr, 2, 2, nil, &cfg, false, st, fs)
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		r := s.result()
		x := float64(r.servedLarge) + reward*float64(r.served)
		sum += x
		sq += x * x
	}
	mean = sum / traces
	return mean, math.Sqrt((sq/traces - mean*mean) / traces), want
}

// TestGoalReference: where (e) is solved it is the reference of the gap
// goal, and the report says how much of the migration bound's gap it
// closes; elsewhere the reference is (d). (e) never moves an allocated
// device.
func TestGoalReference(t *testing.T) {
	rep, err := Run(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Ratios {
		want := []string{Migrate}
		if r.Scenario == "2gpu" {
			want = []string{Exact, ExactAdmission}
		}
		if !slices.Contains(want, r.Bound) {
			t.Errorf("%s/%s: gap reference %s, want one of %v", r.Scenario, r.Mix, r.Bound, want)
		}
		if (r.Bound != Migrate) == math.IsNaN(r.ExactOfMigrateGap) && r.MigrateLarge > r.FirstFitLarge {
			t.Errorf("%s/%s: share of the migration gap (e) closes is %v with reference %s", r.Scenario, r.Mix, r.ExactOfMigrateGap, r.Bound)
		}
	}
	for _, tr := range rep.Traces {
		if (tr.Strategy == Exact || tr.Strategy == ExactAdmission) && !tr.NA && tr.Moved != 0 {
			t.Errorf("%s/%s seed %d: %s moved %d allocated devices", tr.Scenario, tr.Mix, tr.Seed, tr.Strategy, tr.Moved)
		}
		if (tr.Strategy == Exact || tr.Strategy == ExactAdmission) && tr.Scenario == "2gpu" && tr.NA {
			t.Errorf("%s/%s seed %d: %s not solved: %s", tr.Scenario, tr.Mix, tr.Seed, tr.Strategy, tr.Reason)
		}
	}
	if s := rep.String(); !strings.Contains(s, "bound closes of (a)→(d)") {
		t.Error("report lacks the bounds table")
	}
}

// TestExactLooksAhead: the policy values a placement by the arrivals still
// to come. On one GPU with 1g.10gb and 4g.40gb demand, the first of two 1g
// claims goes to the right half (a 4g may arrive next and needs the left
// half); the last one, with nothing left to arrive, has every placement
// worth the same and takes the first.
func TestExactLooksAhead(t *testing.T) {
	m := a100(t)
	cfg := DefaultConfig()
	mix := Mix{Name: "1g+4g", Weights: map[string]float64{"1g.10gb": 1, "4g.40gb": 1}}
	dp, err := newOnlineDP(m, mix, 1, 2, cfg.LossLoad, cfg.ExactValues)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := newFeasibleSet(m, mixProfiles(cfg.Mixes))
	if err != nil {
		t.Fatal(err)
	}
	tr := trace{claims: []claim{
		{id: 0, profile: "1g.10gb", arrive: 0, hold: 1000},
		{id: 1, profile: "1g.10gb", arrive: 1, hold: 1000},
	}}
	s := newSim(m, tr, 1, 1, nil, &cfg, false, onlineStrategy{dp: dp, arrive: []float64{0, 1}}, fs)
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if c := s.claims[0]; c.gpu != 0 || c.dev.Start < 4 {
		t.Errorf("first 1g.10gb got %s on GPU %d, want the right half (start 4-6)", c.dev, c.gpu)
	}
	if c := s.claims[1]; c.gpu != 0 || c.dev.Start != 0 {
		t.Errorf("last 1g.10gb got %s on GPU %d, want start 0 (nothing left to arrive)", c.dev, c.gpu)
	}
}

// TestAdmissionDominates: the optimal policy that may also turn a claim
// away (admission control) is worth at least the one that serves whenever
// a placement exists, in every cluster state, for every reward per claim;
// and for a small reward, strictly more from the empty cluster for every
// default mix: turning small claims away keeps room for large ones.
func TestAdmissionDominates(t *testing.T) {
	m := a100(t)
	const n = 12
	for _, mix := range DefaultMixes() {
		dp, err := newOnlineDP(m, mix, 2, n, 0.9, 5_000_000)
		if err != nil {
			t.Fatal(err)
		}
		for _, reward := range []float64{onlineEpsilon, 0.2, 1} {
			serve := dp.solveValues(n, reward, false, nil)
			admit := dp.admissionValues(n, reward)
			for k := range admit {
				for c := range admit[k] {
					if admit[k][c] < serve[k][c]-1e-9 {
						t.Fatalf("%s, reward %g: admission worth %g < %g in state %v with %d left", mix.Name, reward, admit[k][c], serve[k][c], dp.tuples[c], k)
					}
				}
			}
		}
		if a, e := emptyValue(dp, dp.admissionValues(n, 0.05), n), emptyValue(dp, dp.solveValues(n, 0.05, false, nil), n); a < e+1e-3 {
			t.Errorf("%s: admission worth %.4f from empty, serving whenever possible %.4f: want admission strictly better", mix.Name, a, e)
		}
	}
}

// TestAdmissionSimulated: played on traces in the simulator, with claims
// dropped at once where they are not placed (a claim turned away is lost,
// as the solver assumes), the admission policy earns on average what its
// value function promises (within four standard errors).
func TestAdmissionSimulated(t *testing.T) {
	mean, se, want := simulateOnline(t, DefaultMixes()[0], 0.3, true)
	if math.Abs(mean-want) > 4*se {
		t.Errorf("simulated admission policy earns %.3f per trace, value function says %.3f (standard error %.3f)", mean, want, se)
	}
}
