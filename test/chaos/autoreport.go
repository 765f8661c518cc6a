package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Describe is a multi-line account of an Auto result: the scenario, its faults, counts,
// problems and notes.
func (r *AutoResult) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.Scenario.Describe())
	describeFaults(&b, r.Faults)
	fmt.Fprintf(&b, "  %d pods, %d served; %d devices destroyed (%.2f per pod served; %d made in the run and never allocated), %d GPU layouts planned (%d back to an earlier one), %d drains; settled in %s (holds kept) and %s (released); took %s\n",
		r.Pods, r.Served, r.Destroyed, r.DestroyedPerServed(), r.Unused, r.Plans, r.Reverts, r.Drains,
		r.Settle1.Round(100*time.Millisecond), r.Settle2.Round(100*time.Millisecond), r.Took.Round(100*time.Millisecond))
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// WriteAutoTable prints one line per Auto scenario and the totals.
func WriteAutoTable(w io.Writer, results []*AutoResult, took time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "seed\tfaults\tstruck\tpods\tserved\tdestroyed\tdestroyed/served\tunused destroyed\tplans\treverts\tstuck\tunpacked\talloc. destroyed\tdestroyed undrained\talloc. unpublished/withdrawn\talloc. on tainted\tpool≠NVML\tleaked\tnot settled\tsettle (kept)\tsettle (released)\t")
	var t AutoResult
	for _, r := range results {
		var kinds []string
		struck := 0
		for _, f := range r.Faults {
			kinds = append(kinds, string(f.Fault.Kind))
			if f.Fired {
				struck++
			}
		}
		if len(kinds) == 0 {
			kinds = []string{string(FaultNone)}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%.1fs\t\n", r.Scenario.Seed,
			strings.Join(kinds, "+"), struck, r.Pods, r.Served, r.Destroyed, r.DestroyedPerServed(), r.Unused, r.Plans, r.Reverts,
			r.Stuck, r.Unpacked, r.AllocatedDestroyed, r.UndrainedDestroyed, r.PoolAllocAnomalies, r.TaintedAllocations, r.PoolMismatch, r.Leaked,
			r.NotConverged, r.Settle1.Seconds(), r.Settle2.Seconds())
		t.Pods += r.Pods
		t.Served += r.Served
		t.Destroyed += r.Destroyed
		t.Unused += r.Unused
		t.Plans += r.Plans
		t.Reverts += r.Reverts
		t.Stuck += r.Stuck
		t.Unpacked += r.Unpacked
		t.AllocatedDestroyed += r.AllocatedDestroyed
		t.UndrainedDestroyed += r.UndrainedDestroyed
		t.PoolAllocAnomalies += r.PoolAllocAnomalies
		t.TaintedAllocations += r.TaintedAllocations
		t.PoolMismatch += r.PoolMismatch
		t.Leaked += r.Leaked
		t.NotConverged += r.NotConverged
		t.PoolAbsences = append(t.PoolAbsences, r.PoolAbsences...)
	}
	fmt.Fprintf(tw, "all\t\t\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\t\t\n", t.Pods, t.Served, t.Destroyed,
		t.DestroyedPerServed(), t.Unused, t.Plans, t.Reverts, t.Stuck, t.Unpacked, t.AllocatedDestroyed, t.UndrainedDestroyed, t.PoolAllocAnomalies,
		t.TaintedAllocations, t.PoolMismatch, t.Leaked, t.NotConverged)
	tw.Flush()
	fmt.Fprintf(w, "%d Auto scenarios in %s.\n", len(results), took.Round(time.Second))
	fmt.Fprint(w, absenceLine(t.PoolAbsences))
}
