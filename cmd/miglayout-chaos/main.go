// Command miglayout-chaos runs the long mode of miglayout's chaos suite (test/chaos) on a
// test cluster with simulated GPUs: (with -auto-scenarios) seeded Auto scenarios of pods
// arriving and departing while the planner repartitions under a fault, then many seeded
// Static scenarios of layout changes and claim churn under injected faults, then (unless
// -race-rounds=0) the drain race, and prints the tables the README's Reliability section
// shows.
//
//	go run ./cmd/miglayout-chaos -scenarios 500
//	go run ./cmd/miglayout-chaos -scenarios 0 -auto-scenarios 40 -race-rounds 0
//
// It needs the control-plane binaries of `make testbin`. Every scenario derives from its
// seed; a failing seed is printed (add it to the regressions table of
// test/chaos/chaos_test.go, or replay it with -seeds). Ctrl-C stops after the running
// scenario and prints the tables so far. The exit status is 1 when an invariant was
// violated.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/miglayout/miglayout/pkg/managerrun"
	"github.com/miglayout/miglayout/test/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	n := flag.Int("scenarios", 500, "number of chaos scenarios")
	seed := flag.Int64("seed", 0, "master seed the scenario seeds derive from (0: from the clock)")
	seeds := flag.String("seeds", "", "comma-separated scenario seeds to run instead (replays)")
	mainFaults := flag.Int("main-faults", len(chaos.PrimaryFaults), "derive the seeds and scenarios with the first this many main faults, as there were when a replayed run or seed was found (a scenario's main fault is its seed modulo their number)")
	raceRounds := flag.Int("race-rounds", 10, "drain-race rounds per scheduler mode (0: no drain race)")
	state := flag.String("state", "", "keep the cluster's state and logs in this directory")
	every := flag.Int("table-every", 50, "print the table every this many scenarios")
	autoN := flag.Int("auto-scenarios", 0, "number of Auto-mode chaos scenarios, run before the Static ones")
	autoSeedList := flag.String("auto-seeds", "", "comma-separated Auto scenario seeds to run instead (replays)")
	autoWindow := flag.Duration("auto-window", 12*time.Second, "how long pods arrive and depart in each Auto scenario")
	autoLiveness := flag.Duration("auto-liveness", 45*time.Second, "how long a pending pod that fits may stay pending once an Auto scenario's churn is over")
	flag.Parse()
	if err := errors.Join(managerrun.NoArgs(flag.Args()), checkFlags(*n, *autoN, *raceRounds, *mainFaults, *autoWindow, *autoLiveness)); err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}
	list, err := seedList(*seeds, chaos.SeedsOf(*seed, *n, *mainFaults))
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: -seeds: %v\n", err)
		return 2
	}
	autoList, err := seedList(*autoSeedList, chaos.AutoSeeds(*seed, *autoN))
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: -auto-seeds: %v\n", err)
		return 2
	}

	start := time.Now()
	env, err := chaos.StartEnv(context.WithoutCancel(ctx), chaos.EnvOptions{StateDir: *state, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: starting the cluster: %v\n", err)
		return 1
	}
	defer env.Stop()
	nodes := append(append([]string(nil), env.ChaosNodes...), env.AllRaceNodes()...)
	mon, err := chaos.NewMonitor(context.Background(), env, nodes, 100*time.Millisecond)
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: %v\n", err)
		return 1
	}
	defer mon.Stop()
	runner, err := chaos.NewRunner(ctx, env, mon, "chaos-"+rand.String(5))
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: %v\n", err)
		return 1
	}
	runner.MainFaults = *mainFaults
	fmt.Printf("miglayout-chaos: %d Static and %d Auto scenarios, master seed %d; cluster up in %s\n", len(list), len(autoList), *seed, time.Since(start).Round(time.Second))

	code := 0
	// Auto scenarios first, as the test suite runs them: each sets its own base layout,
	// and the Static runner's setup takes the cluster from wherever they leave it.
	if len(autoList) > 0 && runAuto(ctx, env, mon, autoList, *autoWindow, *autoLiveness) {
		code = 1
	}
	var sum *chaos.Summary
	var sofar []*chaos.Result
	sum, err = runner.RunAll(ctx, list, func(i int, res *chaos.Result) {
		sofar = append(sofar, res)
		status := "ok"
		switch {
		case res.KnownBug() != "":
			status = "KNOWN BUG"
		case res.Failed():
			status, code = "FAILED", 1
		}
		fmt.Printf("[%d/%d] %s %s (%s)\n", i+1, len(list), status, res.Scenario.Describe(), res.Took.Round(100*time.Millisecond))
		if res.Failed() {
			fmt.Print(res.Describe())
		}
		if *every > 0 && (i+1)%*every == 0 && i+1 < len(list) {
			fmt.Printf("\n-- after %d scenarios (%s):\n", i+1, time.Since(start).Round(time.Second))
			(&chaos.Summary{Results: sofar, Took: time.Since(start)}).WriteTable(os.Stdout)
			fmt.Println()
		}
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: %v\n", err)
		code = 1
	}
	if len(list) > 0 {
		fmt.Printf("\n## Chaos: %d scenarios (master seed %d)\n\n", len(sum.Results), *seed)
		sum.WriteTable(os.Stdout)
		var failing, known []string
		for _, f := range sum.Failed() {
			if f.KnownBug() != "" {
				known = append(known, fmt.Sprint(f.Scenario.Seed))
			} else {
				failing = append(failing, fmt.Sprint(f.Scenario.Seed))
			}
		}
		if len(failing) > 0 {
			fmt.Printf("failing seeds: %s\n", strings.Join(failing, ","))
		}
		if len(known) > 0 {
			fmt.Printf("seeds that hit a known product bug (chaos.KnownBugs): %s\n", strings.Join(known, ","))
		}
	}
	polls, errs, ooo := mon.Stats()
	fmt.Printf("monitor: %d simulator polls, %d watch events out of revision order, %d errors %v\n", polls, ooo, len(errs), errs)

	if *raceRounds > 0 && ctx.Err() == nil {
		const stall = 600 * time.Millisecond
		cells, err := chaos.RunDrainRace(ctx, env, mon, "race-"+rand.String(5), chaos.RaceOptions{Rounds: *raceRounds, Stall: stall, Seed: *seed,
			Logf: func(f string, a ...any) { fmt.Printf(f+"\n", a...) }})
		fmt.Printf("\n## Drain race: %d rounds per scheduler mode\n\n", *raceRounds)
		chaos.WriteRaceTable(os.Stdout, cells)
		for _, c := range cells {
			for _, d := range c.Details {
				fmt.Printf("  %s, %s: %s\n", c.Mode, c.Label(), d)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "miglayout-chaos: drain race: %v\n", err)
			code = 1
		}
		// The rounds run before an error count too.
		if v := chaos.RaceViolations(cells, stall); len(v) > 0 {
			fmt.Fprintf(os.Stderr, "miglayout-chaos: drain race broke invariants:\n  %s\n", strings.Join(v, "\n  "))
			code = 1
		}
	}
	fmt.Printf("\ntook %s\n", time.Since(start).Round(time.Second))
	return code
}

// seedList parses a comma-separated list of seeds; "" gives def.
func seedList(list string, def []int64) ([]int64, error) {
	if list == "" {
		return def, nil
	}
	var out []int64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// runAuto runs the Auto scenarios of seeds, printing each result and then the table;
// it reports whether any failed.
func runAuto(ctx context.Context, env *chaos.Env, mon *chaos.Monitor, seeds []int64, window, liveness time.Duration) (failed bool) {
	runner, err := chaos.NewRunner(ctx, env, mon, "auto-"+rand.String(5))
	if err != nil {
		fmt.Fprintf(os.Stderr, "miglayout-chaos: %v\n", err)
		return true
	}
	start := time.Now()
	var results []*chaos.AutoResult
	var failing []string
	for i, s := range seeds {
		if ctx.Err() != nil {
			break
		}
		res := runner.RunAuto(ctx, chaos.NewAutoScenario(s, window), liveness)
		if ctx.Err() != nil {
			break // interrupted: the result is not one
		}
		results = append(results, res)
		status := "ok"
		if res.Failed() {
			status = "FAILED"
			failing = append(failing, fmt.Sprint(s))
		}
		fmt.Printf("[auto %d/%d] %s seed %d (%s)\n", i+1, len(seeds), status, s, res.Took.Round(100*time.Millisecond))
		if res.Failed() {
			fmt.Print(res.Describe())
		}
	}
	fmt.Printf("\n## Auto chaos: %d scenarios\n\n", len(results))
	chaos.WriteAutoTable(os.Stdout, results, time.Since(start))
	if len(failing) > 0 {
		fmt.Printf("failing Auto seeds: %s\n", strings.Join(failing, ","))
	}
	return len(failing) > 0
}

// checkFlags refuses counts below 0 (-scenarios, -auto-scenarios,
// -race-rounds: 0 runs none) and Auto windows that are not positive,
// before the cluster starts.
func checkFlags(scenarios, autoScenarios, raceRounds, mainFaults int, autoWindow, autoLiveness time.Duration) error {
	for _, c := range []struct {
		name string
		n    int
	}{{"scenarios", scenarios}, {"auto-scenarios", autoScenarios}, {"race-rounds", raceRounds}} {
		if c.n < 0 {
			return fmt.Errorf("-%s=%d: want 0 or more", c.name, c.n)
		}
	}
	if mainFaults < 1 || mainFaults > len(chaos.PrimaryFaults) {
		return fmt.Errorf("-main-faults=%d: want 1 to %d", mainFaults, len(chaos.PrimaryFaults))
	}
	if autoWindow <= 0 {
		return fmt.Errorf("-auto-window=%s: want more than 0", autoWindow)
	}
	if autoLiveness <= 0 {
		return fmt.Errorf("-auto-liveness=%s: want more than 0", autoLiveness)
	}
	return nil
}
