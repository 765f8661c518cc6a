package quality

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

// testFeasible is the feasible set of the default mixes' profiles.
func testFeasible(t *testing.T, m *mig.Model) *feasibleSet {
	t.Helper()
	fs, err := newFeasibleSet(m, mixProfiles(DefaultMixes()))
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// queueOutcome is what the queue model reports for a trace: claims served,
// large claims served, and the waits of 7g.80gb claims.
type queueOutcome struct {
	Served, ServedLarge int
	Waits               []float64
}

// TestQueueWaitsFromArrivalToReadyDevice: in the queue model a claim's wait
// runs from its arrival to the moment its device is usable (once a device
// being created is ready); a claim still running when the run ends counts
// as served; a claim never served waits ∞; the run lasts QueueDrain mean
// holds past the last arrival, and a device ready only after that does not
// serve.
func TestQueueWaitsFromArrivalToReadyDevice(t *testing.T) {
	m := a100(t)
	fs := testFeasible(t, m)
	seven := func(id int, arrive, hold float64) claim {
		return claim{id: id, profile: "7g.80gb", large: true, arrive: arrive, hold: hold}
	}
	for name, tc := range map[string]struct {
		claims []claim
		drain  float64
		want   queueOutcome
	}{
		"one GPU taken in turn": {
			// Claim 0 waits for its 7g.80gb to be created (10 s); claim 1
			// for claim 0 to leave (at 1010); claim 2 for claim 1 (at 1110)
			// and runs past the end; claim 3 is never served.
			claims: []claim{seven(0, 0, 1000), seven(1, 5, 100), seven(2, 20, 1e9), seven(3, 30, 10)},
			drain:  10,
			want:   queueOutcome{Served: 3, ServedLarge: 3, Waits: []float64{10, 1005, 1090, math.Inf(1)}},
		},
		"a device ready after the end serves no one": {
			claims: []claim{seven(0, 0, 100)},
			drain:  0,
			want:   queueOutcome{Waits: []float64{math.Inf(1)}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.QueueDrain = tc.drain
			s := newSim(m, trace{claims: tc.claims}, 1, 1, nil, &cfg, true, firstFit{}, fs)
			if err := s.run(); err != nil {
				t.Fatal(err)
			}
			r := s.result()
			got := queueOutcome{Served: r.served, ServedLarge: r.servedLarge, Waits: r.waits["7g.80gb"]}
			slices.Sort(got.Waits)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("queue outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// dropCounts are the loss audit's counters.
type dropCounts struct {
	Drops, Local, Global, Large, LargeLocal, LargeGlobal int
}

// TestDropAuditCountsWhatMigrationWouldServe: a claim lost in the loss model
// is counted, as large if it is, and as one that moving running devices
// would have served within one GPU (its devices repacked in place) or only
// across GPUs, or neither.
func TestDropAuditCountsWhatMigrationWouldServe(t *testing.T) {
	for name, tc := range map[string]struct {
		layouts []string
		owned   map[int][]string
		profile string
		want    dropCounts
	}{
		"a 4g beside a 3g at slice 0: moving the 3g on its GPU makes room": {
			layouts: []string{"3g.40gb@0"}, owned: map[int][]string{0: {"3g.40gb@0"}}, profile: "4g.40gb",
			want: dropCounts{Drops: 1, Local: 1, Global: 1, Large: 1, LargeLocal: 1, LargeGlobal: 1},
		},
		"a 4g that fits only once devices move across GPUs": {
			layouts: []string{"3g.40gb@0,1g.10gb@4", "1g.10gb@0,3g.40gb@4"},
			owned:   map[int][]string{0: {"3g.40gb@0", "1g.10gb@4"}, 1: {"1g.10gb@0", "3g.40gb@4"}}, profile: "4g.40gb",
			want: dropCounts{Drops: 1, Global: 1, Large: 1, LargeGlobal: 1},
		},
		"a 7g beside a running 1g on the only GPU: no migration helps": {
			layouts: []string{"1g.10gb@6"}, owned: map[int][]string{0: {"1g.10gb@6"}}, profile: "7g.80gb",
			want: dropCounts{Drops: 1, Large: 1},
		},
		"a small claim beside a running 7g": {
			layouts: []string{"7g.80gb@0"}, owned: map[int][]string{0: {"7g.80gb@0"}}, profile: "1g.10gb",
			want: dropCounts{Drops: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSim(t, tc.layouts, tc.profile)
			s.feasible = testFeasible(t, s.model)
			for gi, ds := range tc.owned {
				for _, d := range ds {
					s.own(t, gi, d)
				}
			}
			c := s.claims[0]
			p, _ := mig.ParseProfileName(c.profile)
			c.large = p.ComputeSlices >= 3
			s.auditDrop(c)
			got := dropCounts{s.drops, s.dropsLocal, s.dropsGlobal, s.largeDrops, s.largeDropsLocal, s.largeDropsGlb}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("drop counters (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSimRefusesWhatNoRealSystemDoes: the simulator refuses to give a claim
// a device another claim holds, to move allocated devices for a strategy
// that does not migrate, and to change a GPU whose change is in flight for
// a strategy with a per-GPU lock (until the change is done).
func TestSimRefusesWhatNoRealSystemDoes(t *testing.T) {
	two := mig.MustParseLayout("1g.10gb@0,1g.10gb@1")
	for name, tc := range map[string]struct {
		act     func(s *sim) error
		wantErr bool
	}{
		"a device another claim holds": {
			act: func(s *sim) error {
				s.own(t, 0, "1g.10gb@6")
				return s.assign(0, 0, mig.Device{Profile: "1g.10gb", Start: 6})
			},
			wantErr: true,
		},
		"a repack by a strategy that does not migrate": {
			act: func(s *sim) error {
				s.strat = firstFit{}
				return s.repack(map[int]mig.Layout{0: two}, nil)
			},
			wantErr: true,
		},
		"a second change in flight under a lock": {
			act: func(s *sim) error {
				s.strat = nos{}
				if err := s.change(0, mig.MustParseLayout("1g.10gb@0"), false); err != nil {
					return err
				}
				return s.change(0, two, false)
			},
			wantErr: true,
		},
		"a second change under a lock once the first is done": {
			act: func(s *sim) error {
				s.strat = nos{}
				if err := s.change(0, mig.MustParseLayout("1g.10gb@0"), false); err != nil {
					return err
				}
				s.now += s.repartition
				return s.change(0, two, false)
			},
		},
		"a second change in flight without a lock": {
			act: func(s *sim) error {
				s.strat = firstFit{}
				if err := s.change(0, mig.MustParseLayout("1g.10gb@0"), false); err != nil {
					return err
				}
				return s.change(0, two, false)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSim(t, []string{"1g.10gb@6"}, "1g.10gb")
			if err := tc.act(s); (err != nil) != tc.wantErr {
				t.Errorf("error %v, want one: %v", err, tc.wantErr)
			}
		})
	}
}

// TestRecreatingFreeDevicesCountsWithoutLayoutChange: a change that keeps
// the layout but recreates its free devices (nos's method) counts them as
// destroyed and created, and they are usable only once it is done.
func TestRecreatingFreeDevicesCountsWithoutLayoutChange(t *testing.T) {
	s := testSim(t, []string{"1g.10gb@0,3g.40gb@4"})
	s.strat = nos{}
	s.own(t, 0, "1g.10gb@0")
	if err := s.change(0, s.gpus[0].layout, true); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{
		"changes": float64(s.changes), "destroyed": float64(s.destroyed), "created": float64(s.created),
		"3g ready": s.gpus[0].ready[mig.Device{Profile: "3g.40gb", Start: 4}],
	}
	want := map[string]float64{"changes": 1, "destroyed": 1, "created": 1, "3g ready": s.now + s.repartition}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMigrateCountsRepackedDevices: free migration moves a running 3g.40gb
// from slice 0 to slice 4 to make room for a 4g.40gb, and counts the device
// it destroys, those it creates and the instance it moves.
func TestMigrateCountsRepackedDevices(t *testing.T) {
	s := testSim(t, []string{"3g.40gb@0"}, "4g.40gb")
	s.feasible = testFeasible(t, s.model)
	s.strat = migrate{}
	s.own(t, 0, "3g.40gb@0")
	if err := (migrate{}).decide(s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int]string{0: "0/4g.40gb@0", 1: "0/3g.40gb@4"}, placed(s)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	got := map[string]int{"destroyed": s.destroyed, "created": s.created, "moved": s.moved}
	if diff := cmp.Diff(map[string]int{"destroyed": 1, "created": 2, "moved": 1}, got); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

// lockedProbe changes GPU 0 at its first decision and serves no one; it
// records when it is asked to decide.
type lockedProbe struct{ at *[]float64 }

func (lockedProbe) lock() bool     { return true }
func (lockedProbe) migrates() bool { return false }
func (lockedProbe) delay() bool    { return true }
func (p lockedProbe) decide(s *sim) error {
	*p.at = append(*p.at, s.now)
	if len(*p.at) == 1 {
		return s.change(0, mig.MustParseLayout("1g.10gb@0"), false)
	}
	return nil
}

// TestStrategiesDecideWhenAChangeIsDone: the end of a change is an event,
// so a strategy waiting on a locked GPU decides again as soon as the change
// is done, not only at the next arrival or departure (and, last, at the
// claim's deadline, when it may still be given a device).
func TestStrategiesDecideWhenAChangeIsDone(t *testing.T) {
	m := a100(t)
	cfg := DefaultConfig()
	var at []float64
	tr := trace{claims: []claim{{id: 0, profile: "7g.80gb", large: true, arrive: 0, hold: 100}}}
	s := newSim(m, tr, 1, 1, nil, &cfg, false, lockedProbe{at: &at}, testFeasible(t, m))
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{0, cfg.Repartition, cfg.Deadline}, at); diff != "" {
		t.Errorf("decision times (-want +got):\n%s", diff)
	}
}
