// Command miglayout-bench runs the Auto-mode planner's benchmarks side by
// side: plan quality on seeded synthetic traces (pkg/planner/quality) against
// first-fit, nos's count-greedy method, the best static layout in hindsight,
// free migration, the optimal online policy solved exactly and a clairvoyant
// search on small clusters, and prints one table with the issue's
// ratios.
//
//	go run ./cmd/miglayout-bench [-seeds N] [-quick] [-scenario 16gpu|2gpu] [-strategies a,b]
//
// The planning-time benchmark (#1) is not run here: its inputs are test
// helpers of package planner; run it with
//
//	go test -run '^$' -bench Plan -benchmem ./pkg/planner
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/pkg/planner/quality"
)

func main() {
	seeds := flag.Int("seeds", 0, "traces per mix and model in every scenario (0: the default of each scenario)")
	quick := flag.Bool("quick", false, "a short run (seconds)")
	seed := flag.Uint64("seed", 1, "base seed")
	strategies := flag.String("strategies", "", "comma-separated strategies (default all: "+strings.Join(quality.AllStrategies, ",")+")")
	parallel := flag.Int("parallel", 0, "traces simulated at once (0: GOMAXPROCS)")
	scenario := flag.String("scenario", "", "run only this scenario (e.g. 16gpu, 2gpu; default all)")
	initial := flag.String("initial", "", "layout every GPU starts with, e.g. 7g.80gb@0 (default: MIG on, no device)")
	flag.Parse()

	cfg := quality.DefaultConfig()
	if *quick {
		cfg = quality.QuickConfig()
	}
	if *seeds > 0 {
		for i := range cfg.Scenarios {
			cfg.Scenarios[i].Seeds = *seeds
		}
	}
	if *scenario != "" {
		cfg.Scenarios = slices.DeleteFunc(cfg.Scenarios, func(s quality.Scenario) bool { return s.Name != *scenario })
		if len(cfg.Scenarios) == 0 {
			fmt.Fprintf(os.Stderr, "miglayout-bench: no scenario %q\n", *scenario)
			os.Exit(2)
		}
	}
	cfg.Seed = *seed
	cfg.Parallel = *parallel
	cfg.Initial = *initial
	if *strategies != "" {
		cfg.Strategies = strings.Split(*strategies, ",")
	}
	rep, err := quality.Run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "miglayout-bench:", err)
		os.Exit(1)
	}
	fmt.Print(rep.String())
}
