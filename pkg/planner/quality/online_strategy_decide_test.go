package quality

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// onlineSim is testSim with strategy (e) solved for mix on the given GPUs
// and n arrivals, the arrivals still to come at arrive (testSim's clock
// reads 100).
func onlineSim(t *testing.T, mix map[string]float64, n int, arrive []float64, layouts []string, pending ...string) (*sim, onlineStrategy) {
	t.Helper()
	s := testSim(t, layouts, pending...)
	dp, err := newOnlineDP(s.model, Mix{Name: "test", Weights: mix}, len(layouts), n, 0.9, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	st := onlineStrategy{dp: dp, arrive: arrive}
	s.strat = st
	return s, st
}

// TestOnlinePlacesEveryPendingClaimInOneDecision: two claims waiting at
// once both get a device in the same decision, in arrival order.
func TestOnlinePlacesEveryPendingClaimInOneDecision(t *testing.T) {
	s, st := onlineSim(t, map[string]float64{"1g.10gb": 1}, 0, nil, []string{""}, "1g.10gb", "1g.10gb")
	if err := st.decide(s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int]string{0: "0/1g.10gb@0", 1: "0/1g.10gb@1"}, placed(s)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}

// TestOnlineKeepsRoomForClaimsThatAreNotLarge: with only 1g.10gb and
// 2g.20gb claims (none large), the policy still maximises the claims
// served: with three arrivals to come, a 1g.10gb goes to slice 6, the one
// start that takes no 2g.20gb placement, not to the first start.
func TestOnlineKeepsRoomForClaimsThatAreNotLarge(t *testing.T) {
	s, st := onlineSim(t, map[string]float64{"1g.10gb": 1, "2g.20gb": 1}, 3, []float64{200, 300, 400}, []string{""}, "1g.10gb")
	if err := st.decide(s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int]string{0: "0/1g.10gb@6"}, placed(s)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}

// TestOnlineRefusesWhatItWasNotSolvedFor: strategy (e) reports an error,
// rather than guessing, for a claim of a profile outside its mix and for
// more arrivals to come than its value table covers.
func TestOnlineRefusesWhatItWasNotSolvedFor(t *testing.T) {
	for name, tc := range map[string]struct {
		n       int
		arrive  []float64
		pending string
	}{
		"profile outside the mix":        {n: 1, pending: "1g.10gb"},
		"more arrivals left than solved": {n: 1, arrive: []float64{200, 300}, pending: "7g.80gb"},
	} {
		t.Run(name, func(t *testing.T) {
			s, st := onlineSim(t, map[string]float64{"7g.80gb": 1}, tc.n, tc.arrive, []string{""}, tc.pending)
			if err := st.decide(s); err == nil {
				t.Errorf("no error; placements %v", placed(s))
			}
		})
	}
}
