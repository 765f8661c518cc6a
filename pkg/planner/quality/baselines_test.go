package quality

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// testSim is a simulation at time 100 of GPUs with the given layouts (one
// per node), every device ready, and pending claims of the given profiles.
func testSim(t *testing.T, layouts []string, pending ...string) *sim {
	t.Helper()
	s := &sim{model: a100(t), perNode: 1, now: 100, repartition: 10}
	for i, layout := range layouts {
		g := &simGPU{idx: i, node: i, owner: map[mig.Device]int{}, ready: map[mig.Device]float64{}}
		if layout != "" {
			g.layout = mig.MustParseLayout(layout).Canonical()
		}
		for _, d := range g.layout {
			g.ready[d] = 0
		}
		s.gpus = append(s.gpus, g)
	}
	for id, p := range pending {
		s.claims = append(s.claims, &simClaim{claim: &claim{id: id, profile: p, hold: 60}, gpu: -1})
		s.pending = append(s.pending, id)
	}
	return s
}

// own gives device d of GPU gi to a new running claim (not pending).
func (s *sim) own(t *testing.T, gi int, d string) {
	t.Helper()
	dev := mig.MustParseLayout(d)[0]
	id := len(s.claims)
	s.claims = append(s.claims, &simClaim{claim: &claim{id: id, profile: dev.Profile, hold: 60}, st: cRunning, gpu: gi, dev: dev})
	s.gpus[gi].owner[dev] = id
}

// placed is where each claim got its device: "GPU/device", "" if pending.
func placed(s *sim) map[int]string {
	out := map[int]string{}
	for _, c := range s.claims {
		if c.st == cPending {
			out[c.id] = ""
			continue
		}
		out[c.id] = string(rune('0'+c.gpu)) + "/" + c.dev.String()
	}
	return out
}

// TestFirstFitOrder: on a node, strategy (a) takes, claim by claim in
// arrival order, the first GPU in device-name order, and on it the first
// placement start, where a device of the profile is free or can be made
// without touching an allocated device, destroying the free devices in the
// way.
func TestFirstFitOrder(t *testing.T) {
	for name, tc := range map[string]struct {
		layouts []string
		owned   map[int]string
		pending []string
		want    map[int]string
		// destroyed is how many free devices the changes destroy.
		destroyed int
	}{
		"empty GPUs: the first GPU, the first start": {
			layouts: []string{"", ""}, pending: []string{"1g.10gb", "3g.40gb"},
			want: map[int]string{0: "0/1g.10gb@0", 1: "0/3g.40gb@4"},
		},
		"a free device anywhere comes after an earlier GPU with room": {
			layouts: []string{"", "1g.10gb@0"}, pending: []string{"1g.10gb"},
			want: map[int]string{0: "0/1g.10gb@0"},
		},
		"an allocated device sends a 7g to the next GPU": {
			layouts: []string{"1g.10gb@6", ""}, owned: map[int]string{0: "1g.10gb@6"}, pending: []string{"7g.80gb"},
			want: map[int]string{0: "1/7g.80gb@0", 1: "0/1g.10gb@6"},
		},
		"an allocated device in the placement sends a 4g to the next GPU": {
			layouts: []string{"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3", ""}, owned: map[int]string{0: "1g.10gb@3"}, pending: []string{"4g.40gb"},
			want: map[int]string{0: "1/4g.40gb@0", 1: "0/1g.10gb@3"},
		},
		"a 2g goes first where free devices can make way": {
			layouts: []string{"1g.10gb@0,1g.10gb@1", ""}, pending: []string{"2g.20gb"},
			want: map[int]string{0: "0/2g.20gb@0"}, destroyed: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSim(t, tc.layouts, tc.pending...)
			s.strat = firstFit{}
			s.perNode = len(s.gpus)
			for _, g := range s.gpus {
				g.node = 0
			}
			for gi, d := range tc.owned {
				s.own(t, gi, d)
			}
			if err := (firstFit{}).decide(s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, placed(s)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if s.destroyed != tc.destroyed {
				t.Errorf("destroyed %d devices, want %d", s.destroyed, tc.destroyed)
			}
		})
	}
}

// TestFirstFitNodeChoice: strategy (a) leaves the choice among nodes to
// kube-scheduler, which picks at random among the nodes where the claim can
// be allocated a device (schedulerNode), not the first node in name order;
// a node that cannot serve the claim is never picked.
func TestFirstFitNodeChoice(t *testing.T) {
	t.Run("empty nodes share the claims", func(t *testing.T) {
		profiles := []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
		s := testSim(t, []string{"", ""}, profiles...)
		s.strat = firstFit{}
		if err := (firstFit{}).decide(s); err != nil {
			t.Fatal(err)
		}
		// On each node the claims it gets take its starts in name order.
		next := map[int]int{}
		want := map[int]string{}
		for id := range profiles {
			n := s.claims[id].gpu
			if n < 0 {
				t.Fatalf("claim %d left pending on empty GPUs", id)
			}
			want[id] = strconv.Itoa(n) + "/1g.10gb@" + strconv.Itoa(next[n])
			next[n]++
		}
		if len(next) != 2 {
			t.Errorf("six claims all went to node %v; want both empty nodes used", next)
		}
		if diff := cmp.Diff(want, placed(s)); diff != "" {
			t.Errorf("placements (-want +got):\n%s", diff)
		}
	})
	t.Run("a node that cannot serve is never picked", func(t *testing.T) {
		// Node 0 runs a 1g.10gb@6: no 7g.80gb there, whichever claim asks.
		for id := range 8 {
			// Claims 0..id, only the last pending: the hash sees eight ids.
			s := testSim(t, []string{"1g.10gb@6", ""}, slices.Repeat([]string{"7g.80gb"}, id+1)...)
			s.pending = []int{id}
			s.own(t, 0, "1g.10gb@6")
			s.strat = firstFit{}
			if err := (firstFit{}).decide(s); err != nil {
				t.Fatal(err)
			}
			if got := placed(s)[id]; got != "1/7g.80gb@0" {
				t.Errorf("claim %d placed at %q, want 1/7g.80gb@0 (node 0 cannot hold a 7g.80gb)", id, got)
			}
		}
	})
}

// TestNosRecreatesFreeDevices: strategy (b) gives a pending claim a free
// device of its profile if one exists; otherwise it picks for a GPU the
// geometry (profile counts) that serves the most pending demand beside the
// allocated devices, ignoring placements, and applies it recreating every
// free device of the GPU it keeps: counted as destroyed and made again, and
// not usable until the change is done.
func TestNosRecreatesFreeDevices(t *testing.T) {
	s := testSim(t, []string{"1g.10gb@0,3g.40gb@4", "1g.10gb@0"}, "1g.10gb", "1g.10gb")
	s.own(t, 0, "1g.10gb@0")
	st := nos{geoms: []map[string]int{{"1g.10gb": 2, "3g.40gb": 1}}}
	s.strat = st
	if err := st.decide(s); err != nil {
		t.Fatal(err)
	}
	// Claim 0 takes GPU 1's free 1g.10gb; claim 1 a 1g.10gb GPU 0's new
	// geometry makes beside its allocated one.
	if diff := cmp.Diff(map[int]string{0: "1/1g.10gb@0", 1: "0/1g.10gb@1", 2: "0/1g.10gb@0"}, placed(s)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if got := s.gpus[0].layout.String(); got != "1g.10gb@0,1g.10gb@1,3g.40gb@4" {
		t.Errorf("GPU 0 layout %s, want 1g.10gb@0,1g.10gb@1,3g.40gb@4", got)
	}
	// The free 3g.40gb@4 is kept in place but recreated.
	if r := s.gpus[0].ready[mig.Device{Profile: "3g.40gb", Start: 4}]; r != s.now+s.repartition {
		t.Errorf("the free 3g.40gb@4 is usable at %v, want once the change is done (%v)", r, s.now+s.repartition)
	}
	if s.destroyed != 1 || s.created != 2 {
		t.Errorf("destroyed %d, created %d; want 1 (3g.40gb@4 recreated) and 2 (it and the new 1g.10gb)", s.destroyed, s.created)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	tenths := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for name, tc := range map[string]struct {
		xs   []float64
		q    float64
		want float64
	}{
		"median of 1..10":     {tenths, 0.5, 5},
		"p95 of 1..10":        {tenths, 0.95, 10},
		"p90 of 1..10":        {tenths, 0.9, 9},
		"p0 is the least":     {tenths, 0, 1},
		"one value":           {[]float64{7}, 0.95, 7},
		"never served is ∞":   {[]float64{1, 2, math.Inf(1)}, 0.95, math.Inf(1)},
		"p50 below an ∞ tail": {[]float64{1, 2, math.Inf(1)}, 0.5, 2},
	} {
		if got := percentile(tc.xs, tc.q); got != tc.want {
			t.Errorf("%s: percentile = %v, want %v", name, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("percentile of nothing = %v, want NaN", got)
	}
}

// TestRatiosFromTraces: the goals table's figures from known trace results:
// the gap closed on large claims pooled over traces, its bootstrap interval
// around it, the served ratios pooled, the traces on which miglayout served
// fewer than first-fit, and the p95 wait of large claims.
func TestRatiosFromTraces(t *testing.T) {
	cfg := Config{Scenarios: []Scenario{{Name: "s", Models: []string{"loss", "queue"}}}, Mixes: []Mix{{Name: "m"}}}
	rep := Report{Config: cfg}
	add := func(model, strat string, seed uint64, served, large int, waits ...float64) {
		rep.Traces = append(rep.Traces, TraceResult{Scenario: "s", Mix: "m", Model: model, Strategy: strat, Seed: seed,
			N: 100, Served: served, NLarge: 40, ServedLarge: large, Waits: map[string][]float64{"3g.40gb": waits}})
	}
	// Large served over three traces: first-fit 60, miglayout 75,
	// migrate 90 of 120: a gap of 30, half of it closed.
	for seed, v := range map[uint64][3]int{1: {20, 30, 30}, 2: {20, 25, 30}, 3: {20, 20, 30}} {
		add("loss", FirstFit, seed, 80, v[0])
		add("loss", Miglayout, seed, 82-int(seed), v[1])
		add("loss", Migrate, seed, 90, v[2])
	}
	// Queue: large waits 1..20 s under first-fit, half as long under
	// miglayout; miglayout serves one claim fewer on trace 1.
	var ffWaits, mlWaits []float64
	for i := 1; i <= 20; i++ {
		ffWaits = append(ffWaits, float64(i))
		mlWaits = append(mlWaits, float64(i)/2)
	}
	add("queue", FirstFit, 1, 90, 40, ffWaits...)
	add("queue", Miglayout, 1, 89, 40, mlWaits...)
	rep.build()
	if len(rep.Ratios) != 1 {
		t.Fatalf("%d ratios, want 1", len(rep.Ratios))
	}
	r := rep.Ratios[0]
	got := map[string]float64{
		"gap closed":         r.GapClosed,
		"served ratio loss":  math.Round(1000*r.ServedRatioLoss) / 1000,
		"served ratio queue": math.Round(1000*r.ServedRatioQueue) / 1000,
		"p95 large ratio":    r.P95LargeRatio,
		"traces served less": float64(r.TracesServedLess),
		"traces compared":    float64(r.TracesCompared),
	}
	want := map[string]float64{
		"gap closed":         0.5,
		"served ratio loss":  math.Round(1000*float64(81+80+79)/240) / 1000,
		"served ratio queue": math.Round(1000*89.0/90) / 1000,
		"p95 large ratio":    0.5,
		"traces served less": 2, // loss trace 3 (79 < 80), queue trace 1
		"traces compared":    4,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	// Resampling the traces closes between none of the gap (trace 3
	// alone) and all of it (trace 1 alone).
	if !(r.GapLow >= 0 && r.GapLow < r.GapClosed && r.GapClosed < r.GapHigh && r.GapHigh <= 1) {
		t.Errorf("gap interval [%v, %v] around %v, want within [0, 1] and around it", r.GapLow, r.GapHigh, r.GapClosed)
	}
	if gap, served, wait := r.Goals(); !gap || served || !wait {
		t.Errorf("goals gap %v served %v wait %v; want gap and wait met, served not (queue ratio below 1)", gap, served, wait)
	}
}

// TestGapIntervalNeedsTraces: one trace gives no interval, and identical
// traces an interval of no width.
func TestGapIntervalNeedsTraces(t *testing.T) {
	tr := func(strat string, seed uint64, large int) TraceResult {
		return TraceResult{Strategy: strat, Seed: seed, ServedLarge: large}
	}
	if lo, hi := gapInterval([]TraceResult{tr(FirstFit, 1, 10)}, []TraceResult{tr(Miglayout, 1, 15)}, []TraceResult{tr(Migrate, 1, 20)}); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("one trace: interval [%v, %v], want none", lo, hi)
	}
	var ff, ml, b []TraceResult
	for seed := range uint64(5) {
		ff, ml, b = append(ff, tr(FirstFit, seed, 10)), append(ml, tr(Miglayout, seed, 13)), append(b, tr(Migrate, seed, 20))
	}
	if lo, hi := gapInterval(ff, ml, b); lo != 0.3 || hi != 0.3 {
		t.Errorf("identical traces: interval [%v, %v], want [0.3, 0.3]", lo, hi)
	}
}
