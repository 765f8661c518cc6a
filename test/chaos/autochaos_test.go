package chaos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
)

var (
	autoScenarios = flag.Int("chaos.auto-scenarios", 0, "number of Auto-mode chaos scenarios (default 4; 40 with -chaos.long)")
	autoWindow    = flag.Duration("chaos.auto-window", 12*time.Second, "how long pods arrive and depart in each Auto scenario")
	autoLiveness  = flag.Duration("chaos.auto-liveness", 45*time.Second, "how long a pending pod that fits may stay pending once the churn is over")
	autoSeedList  = flag.String("chaos.auto-seeds", "", "comma-separated Auto scenario seeds to run instead of those derived from -chaos.seed")
)

// autoSeeds are the seeds TestAutoChaos runs: -chaos.auto-seeds, else n derived from the
// master seed.
func autoSeeds(t *testing.T, master int64, n int) []int64 {
	if *autoSeedList == "" {
		return AutoSeeds(master, n)
	}
	var out []int64
	for _, f := range strings.Split(*autoSeedList, ",") {
		s, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			t.Fatalf("parsing -chaos.auto-seeds: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// TestAutoChaos runs seeded Auto-mode scenarios (AutoScenario: pods of random profiles
// and priorities arriving and departing while the planner repartitions and a fault
// strikes) and fails on any invariant violation, a pending pod that a GPU could serve
// beside the devices in use left unbound, or unsettled nodes; it prints the devices
// destroyed per pod served.
func TestAutoChaos(t *testing.T) {
	needCluster(t)
	n := *autoScenarios
	if n == 0 {
		n = 4
		if *longMode {
			n = 40
		}
	}
	seed := *masterSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(max(n, len(strings.Split(*autoSeedList, ","))))*(*autoWindow+2*(*autoLiveness)+90*time.Second)+2*time.Minute)
	defer cancel()
	r, err := NewRunner(ctx, env, mon, "auto-"+rand.String(5))
	if err != nil {
		t.Fatal(err)
	}
	seeds := autoSeeds(t, seed, n)
	n = len(seeds)
	t.Logf("auto chaos: %d scenarios from master seed %d (-chaos.seed)", n, seed)
	start := time.Now()
	var results []*AutoResult
	var failed []string
	for i, s := range seeds {
		if ctx.Err() != nil {
			t.Errorf("auto chaos ran %d of %d scenarios before its deadline: %v", i, n, ctx.Err())
			break
		}
		res := r.RunAuto(ctx, NewAutoScenario(s, *autoWindow), *autoLiveness)
		results = append(results, res)
		status := "ok"
		if res.Failed() {
			status = "FAILED"
			failed = append(failed, fmt.Sprint(s))
		}
		t.Logf("auto scenario %d/%d %s in %s:\n%s", i+1, n, status, res.Took.Round(100*time.Millisecond), res.Describe())
		if res.Failed() {
			t.Errorf("auto scenario seed %d failed (run it alone with -chaos.auto-seeds=%d)", s, s)
		}
	}
	var table bytes.Buffer
	WriteAutoTable(&table, results, time.Since(start))
	t.Logf("auto chaos results (master seed %d):\n%s", seed, table.String())
	if len(failed) > 0 {
		t.Errorf("%d of %d Auto scenarios failed; seeds: %s", len(failed), len(results), strings.Join(failed, ", "))
	}
}
