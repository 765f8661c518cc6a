package quality

import "testing"

// TestLossModelServesAtTheDeadlineInstant: in the loss model a claim may
// still be given a device at arrival+Deadline, so a device freed at exactly
// that instant serves it, in the simulator as in the clairvoyant search
// (which bounds the simulated strategies and must agree with them on ties);
// a device freed a moment later does not.
func TestLossModelServesAtTheDeadlineInstant(t *testing.T) {
	m := a100(t)
	fs := testFeasible(t, m)
	seven := func(id int, arrive, hold float64) claim {
		return claim{id: id, profile: "7g.80gb", large: true, arrive: arrive, hold: hold}
	}
	cfg := DefaultConfig()
	for name, tc := range map[string]struct {
		// late is how long after the second claim's deadline the first
		// claim's device is freed.
		late float64
		want int
	}{
		"freed at the deadline": {late: 0, want: 2},
		"freed after it":        {late: 1, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			// In the simulator the first claim's 7g.80gb is created in
			// Config.Repartition seconds and then held for its hold; the
			// second claim arrives at 50.
			hold := 50 + cfg.Deadline - cfg.Repartition + tc.late
			s := newSim(m, trace{claims: []claim{seven(0, 0, hold), seven(1, 50, 100)}}, 1, 1, nil, &cfg, false, firstFit{}, fs)
			if err := s.run(); err != nil {
				t.Fatal(err)
			}
			if got := s.result().served; got != tc.want {
				t.Errorf("simulator served %d claims, want %d", got, tc.want)
			}
			// The clairvoyant search serves at once: the first device is
			// freed at its hold.
			res, err := solveClairvoyant(m, trace{claims: []claim{seven(0, 0, 50+cfg.Deadline+tc.late), seven(1, 50, 100)}}, 1, cfg.Deadline, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if res.total != tc.want {
				t.Errorf("clairvoyant search served %d claims, want %d", res.total, tc.want)
			}
		})
	}
}
