package chaos

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestSummaryVerdict: which results fail (a tainted allocation and a journal
// left are observations), the totals, and the table's rows: a row per fault
// kind a result took part in ("none" for a result with no fault but a pause),
// the "all scenarios" row over every result.
func TestSummaryVerdict(t *testing.T) {
	fault := func(k FaultKind, fired bool) []FaultResult {
		return []FaultResult{{Fault: Fault{Kind: k}, Fired: fired}}
	}
	results := map[string]*Result{
		"clean":         {},
		"tainted":       {TaintedAllocations: 3, Faults: fault(PauseFlap, true)},
		"journal":       {JournalLeft: 1, Drains: 2, DrainsAborted: 1, Faults: fault(KillDraining, false)},
		"destroyed":     {AllocatedDestroyed: 2, Faults: fault(KillDraining, true)},
		"undrained":     {UndrainedDestroyed: 4, Faults: fault(KillDestroying, true)},
		"anomalies":     {PoolAllocAnomalies: 5, Faults: fault(KillCreating, true)},
		"mismatch":      {PoolMismatch: 7},
		"leaked":        {Leaked: 11},
		"not converged": {NotConverged: 2},
	}
	wantFailed := []string{"anomalies", "destroyed", "undrained", "leaked", "mismatch", "not converged"}
	s := &Summary{}
	names := []string{"clean", "tainted", "journal", "destroyed", "undrained", "anomalies", "mismatch", "leaked", "not converged"}
	for _, n := range names {
		s.Results = append(s.Results, results[n])
	}
	var failed []string
	for _, r := range s.Failed() {
		for n, r2 := range results {
			if r == r2 {
				failed = append(failed, n)
			}
		}
	}
	if strings.Join(failed, ",") != "destroyed,undrained,anomalies,mismatch,leaked,not converged" {
		t.Errorf("Failed: %q, want %q", failed, wantFailed)
	}
	for n, r := range results {
		if got, want := r.Failed(), strings.Contains(strings.Join(wantFailed, ","), n); got != want {
			t.Errorf("%s: Failed() = %v, want %v", n, got, want)
		}
	}
	d, ud, a, ta, mm, l, u := s.Totals()
	if got, want := [7]int{d, ud, a, ta, mm, l, u}, [7]int{2, 4, 5, 3, 7, 11, 1}; got != want {
		t.Errorf("Totals = %v, want %v", got, want)
	}

	// A known bug explains failed results only.
	defer func(kb []KnownBug) { KnownBugs = kb }(KnownBugs)
	KnownBugs = []KnownBug{{Name: "any", Explains: func(*Result) bool { return true }}}
	for n, r := range results {
		if got, want := r.KnownBug() != "", r.Failed(); got != want {
			t.Errorf("%s: KnownBug() = %q, failed %v", n, r.KnownBug(), want)
		}
	}

	var b bytes.Buffer
	s.Took = time.Minute
	s.WriteTable(&b)
	rows := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 13 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		// scenarios, struck, destroyed, undrained, anomalies, tainted,
		// pool≠NVML, leaked, not converged, journal, drains, aborted
		rows[cells[0]] = strings.Join(cells[1:13], " ")
	}
	for name, want := range map[string]string{
		"all scenarios":        "9 4 2 4 5 3 7 11 1 1 2 1",
		"none":                 "5 0 0 0 0 3 7 11 1 0 0 0",
		string(KillDraining):   "2 1 2 0 0 0 0 0 0 1 2 1",
		string(KillDestroying): "1 1 0 4 0 0 0 0 0 0 0 0",
		string(KillCreating):   "1 1 0 0 5 0 0 0 0 0 0 0",
		string(PauseFlap):      "1 1 0 0 0 3 0 0 0 0 0 0",
	} {
		if rows[name] != want {
			t.Errorf("row %q: %q, want %q\n%s", name, rows[name], want, b.String())
		}
	}
}
