// Command miglayout-bench runs the Auto-mode planner's benchmarks side by
// side: plan quality on seeded synthetic traces (pkg/planner/quality) against
// first-fit, nos's count-greedy method, the best static layout in hindsight,
// free migration, the optimal online policy solved exactly and a clairvoyant
// search on small clusters, and prints one table with the issue's
// ratios.
//
//	go run ./cmd/miglayout-bench [-seeds N] [-quick] [-scenario 16gpu|2gpu] [-strategies a,b]
//
// With -sizes it instead solves the optimal online policy on clusters of
// 1 to 3 GPUs and prints how much of the gap between first-fit and free
// migration it closes at each size (quality.BoundsBySize; 3 GPUs take
// about three minutes per mix):
//
//	go run ./cmd/miglayout-bench -sizes 1,2,3
//
// The planning-time benchmark (#1) is not run here: its inputs are test
// helpers of package planner; run it with
//
//	go test -run '^$' -bench Plan -benchmem -cpu 1 ./pkg/planner
package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miglayout/miglayout/pkg/managerrun"
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
	sizes := flag.String("sizes", "", "instead, the optimum's share of the first-fit-to-migration gap on clusters of these sizes, e.g. 1,2,3")
	planBinds := flag.Bool("plan-binds-scheduler", false, "miglayout's claims get free devices that exist only where its plan places them, as though kube-scheduler followed the plan (default: kube-scheduler allocates them first, as in a cluster)")
	maxPerNode := flag.Int("max-gpus-per-node", 0, "miglayout's limit on a node's GPUs changing at once (0: every GPU of the node; the controller's default is 1)")
	maxGPUs := flag.Int("max-gpus", 0, "miglayout's limit on GPUs changing at once in the cluster (0: none; the controller's default is 8)")
	reclaim := flag.Duration("reclaim-idle-after", 5*time.Minute, "how long a GPU stays idle before miglayout gives it back whole (0: never; the controller's default, policy.reclaimIdleGPUsAfterSeconds, is 5m)")
	flag.Parse()
	if err := errors.Join(managerrun.NoArgs(flag.Args()), notNegative(map[string]int{"seeds": *seeds, "parallel": *parallel, "max-gpus-per-node": *maxPerNode, "max-gpus": *maxGPUs}), durationNotNegative("reclaim-idle-after", *reclaim)); err != nil {
		fmt.Fprintln(os.Stderr, "miglayout-bench:", err)
		os.Exit(2)
	}

	if *sizes != "" {
		var gpus []int
		for _, f := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				fmt.Fprintf(os.Stderr, "miglayout-bench: -sizes: %v\n", err)
				os.Exit(2)
			}
			gpus = append(gpus, n)
		}
		rows, err := quality.BoundsBySize(quality.DefaultConfig(), gpus, 200_000)
		if err != nil {
			fmt.Fprintln(os.Stderr, "miglayout-bench:", err)
			os.Exit(1)
		}
		fmt.Print(quality.FormatBoundsBySize(rows))
		return
	}

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
	cfg.PlanBindsScheduler = *planBinds
	cfg.MaxGPUsPerNode, cfg.MaxGPUs = *maxPerNode, *maxGPUs
	cfg.Parallel = *parallel
	cfg.ReclaimIdleAfter = reclaim.Seconds()
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

// notNegative refuses the first (by name) of the count flags given by name
// whose value is below 0, which means nothing to them (0 is their default).
func notNegative(counts map[string]int) error {
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if v := counts[name]; v < 0 {
			return fmt.Errorf("-%s=%d: want 0 or more", name, v)
		}
	}
	return nil
}

// durationNotNegative refuses a negative duration flag.
func durationNotNegative(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("-%s=%v: want 0 or more", name, d)
	}
	return nil
}
