package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/cluster"
)

// TestVerdictWithoutPollsFails: a scenario during which the monitor polled
// the simulators not once (every poll failed) fails with a problem naming
// the last poll error, rather than passing on no evidence; one poll since
// the scenario began is enough.
func TestVerdictWithoutPollsFails(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		polledAt  []time.Time
		anomalies int
	}{
		"no poll at all":                 {anomalies: 1},
		"polls before the scenario only": {polledAt: []time.Time{since.Add(-time.Second)}, anomalies: 1},
		"a poll during the scenario":     {polledAt: []time.Time{since.Add(-time.Second), since.Add(time.Second)}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Runner{Env: &Env{}, Mon: &Monitor{polledAt: tc.polledAt, errs: []string{"poll: listing claims: connection refused"}}}
			var problems []string
			problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
			anomalies := r.monitorVerdict(context.Background(), since, nil, problem, problem).anomalies
			if anomalies != tc.anomalies {
				t.Errorf("anomalies %d, want %d (problems %q)", anomalies, tc.anomalies, problems)
			}
			if tc.anomalies > 0 && (len(problems) != 1 || !strings.Contains(problems[0], "connection refused")) {
				t.Errorf("problems %q, want one naming the last poll error", problems)
			}
		})
	}
}

// TestVerdictPoolAbsences: an absent pool passes only where a fired kubelet
// restart of its node explains it and the pool was published again.
func TestVerdictPoolAbsences(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	back := PoolAbsence{Pool: poolA, Deleted: since.Add(time.Second), Published: since.Add(1100 * time.Millisecond)}
	restart := FaultResult{Fault: Fault{Kind: RestartKubelet, Node: poolA}, Fired: true,
		Began: since.Add(900 * time.Millisecond), Ended: since.Add(950 * time.Millisecond)}
	later := func(a PoolAbsence, d time.Duration) PoolAbsence {
		a.Deleted, a.Published = a.Deleted.Add(d), a.Published.Add(d)
		return a
	}
	for name, tc := range map[string]struct {
		absences  []PoolAbsence
		faults    []FaultResult
		anomalies int
		observed  int
	}{
		"published again after the node's kubelet restart": {absences: []PoolAbsence{back}, faults: []FaultResult{restart}, observed: 1},
		"not published again after the restart": {absences: []PoolAbsence{{Pool: poolA, Deleted: back.Deleted}},
			faults: []FaultResult{restart}, anomalies: 1},
		"no kubelet restart":               {absences: []PoolAbsence{back}, anomalies: 1},
		"the kubelet restart did not fire": {absences: []PoolAbsence{back}, faults: []FaultResult{{Fault: restart.Fault}}, anomalies: 1},
		"another node's kubelet restarted": {absences: []PoolAbsence{back},
			faults: []FaultResult{{Fault: Fault{Kind: RestartKubelet, Node: poolB}, Fired: true}}, anomalies: 1},
		"an absence before the scenario, ended": {absences: []PoolAbsence{{Pool: poolA, Deleted: since.Add(-time.Minute), Published: since.Add(-50 * time.Second)}}},
		"an absence begun before the scenario, ended in it": {absences: []PoolAbsence{{Pool: poolA, Deleted: since.Add(-10 * time.Millisecond), Published: since.Add(5 * time.Second)}},
			anomalies: 1},
		"deleted within the slack after the restart": {absences: []PoolAbsence{later(back, restartWipeSlack-time.Second)},
			faults: []FaultResult{restart}, observed: 1},
		"deleted past the slack after the restart": {absences: []PoolAbsence{later(back, restartWipeSlack)},
			faults: []FaultResult{restart}, anomalies: 1},
		"deleted before the restart": {absences: []PoolAbsence{later(back, -200*time.Millisecond)},
			faults: []FaultResult{restart}, anomalies: 1},
		"two absences, one restart": {absences: []PoolAbsence{back, later(back, time.Second)},
			faults: []FaultResult{restart}, observed: 1, anomalies: 1},
		"an agent down past the wipe delay": {absences: []PoolAbsence{later(back, 15*time.Second)},
			faults:   []FaultResult{{Fault: Fault{Kind: KillPastWipe, Node: poolA}, Fired: true, Began: since, Ended: since.Add(17 * time.Second)}},
			observed: 1},
		"deleted soon after the kill, before the wipe delay": {absences: []PoolAbsence{back},
			faults:    []FaultResult{{Fault: Fault{Kind: KillPastWipe, Node: poolA}, Fired: true, Began: since, Ended: since.Add(17 * time.Second)}},
			anomalies: 1},
		"an agent killed, but not past the wipe delay": {absences: []PoolAbsence{later(back, 15*time.Second)},
			faults: []FaultResult{{Fault: Fault{Kind: KillDraining, Node: poolA}, Fired: true}}, anomalies: 1},
		"an absence before the scenario, going on": {absences: []PoolAbsence{{Pool: poolA, Deleted: since.Add(-time.Minute)}},
			faults: []FaultResult{restart}, anomalies: 1},
	} {
		t.Run(name, func(t *testing.T) {
			m := newTestMonitor()
			m.polledAt, m.absences = []time.Time{since.Add(time.Second)}, tc.absences
			r := &Runner{Env: &Env{ChaosNodes: []string{poolA, poolB}}, Mon: m}
			var problems, observed []string
			problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
			note := func(format string, args ...any) { observed = append(observed, fmt.Sprintf(format, args...)) }
			v := r.monitorVerdict(context.Background(), since, tc.faults, problem, note)
			anomalies := v.anomalies
			if anomalies != tc.anomalies || len(problems) != tc.anomalies || len(observed) != tc.observed {
				t.Errorf("anomalies %d, problems %q, observed %q; want %d anomalies and problems, %d observed",
					anomalies, problems, observed, tc.anomalies, tc.observed)
			}
			if want := slices.Repeat([]time.Duration{100 * time.Millisecond}, tc.observed); !slices.Equal(v.absent, want) {
				t.Errorf("absent %v, want %v", v.absent, want)
			}
		})
	}
}

func TestAbsenceLine(t *testing.T) {
	ms := time.Millisecond
	for name, tc := range map[string]struct {
		ds   []time.Duration
		want string
	}{
		"none":  {},
		"one":   {ds: []time.Duration{60 * ms}, want: "pools deleted by a kubelet: 1, published again after p50 60ms, max 60ms.\n"},
		"three": {ds: []time.Duration{300 * ms, 20 * ms, 70 * ms}, want: "pools deleted by a kubelet: 3, published again after p50 70ms, max 300ms.\n"},
		"even":  {ds: []time.Duration{40 * ms, 10 * ms}, want: "pools deleted by a kubelet: 2, published again after p50 10ms, max 40ms.\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := absenceLine(tc.ds); got != tc.want {
				t.Errorf("absenceLine(%v) = %q, want %q", tc.ds, got, tc.want)
			}
		})
	}
}

// TestVerdictCounts: what each kind of finding counts for in the verdict;
// an allocation that waits for a binding the agent refuses, like one on a
// tainted device, fails no scenario.
func TestVerdictCounts(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type counts struct{ destroyed, undrained, tainted, anomalies, observed int }
	for kind, want := range map[FindingKind]counts{
		AllocatedDestroyed:    {destroyed: 1},
		UndrainedDestroyed:    {undrained: 1},
		TaintedAllocation:     {tainted: 1, observed: 1},
		RefusedAllocation:     {observed: 1},
		UnpublishedAllocation: {anomalies: 1},
		WithdrawnAllocated:    {anomalies: 1},
	} {
		t.Run(string(kind), func(t *testing.T) {
			m := newTestMonitor()
			m.polledAt = []time.Time{since.Add(time.Second)}
			m.findings = []Finding{{Kind: kind, Pool: poolA, Device: "x", Claim: "ns/c1", At: since.Add(time.Second)}}
			r := &Runner{Env: &Env{ChaosNodes: []string{poolA}}, Mon: m}
			var problems, observed int
			v := r.monitorVerdict(context.Background(), since, nil,
				func(string, ...any) { problems++ }, func(string, ...any) { observed++ })
			got := counts{v.destroyed, v.undrained, v.tainted, v.anomalies, observed}
			if got != want || problems != v.destroyed+v.undrained+v.anomalies {
				t.Errorf("counts %+v with %d problems, want %+v with %d problems", got, problems, want, want.destroyed+want.undrained+want.anomalies)
			}
		})
	}
}

// TestVerdictIncompletePool: a pool left incomplete (the scheduler allocates
// nothing from it) fails the scenario.
func TestVerdictIncompletePool(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := newTestMonitor()
	m.polledAt = []time.Time{since.Add(time.Second)}
	s := sliceOf("s1", "", poolA, 2, dv{"x", "MIG-1", ""})
	s.Spec.Driver, s.Spec.Pool.ResourceSliceCount = cluster.Driver, 2
	m.slices["s1"], m.absent[poolA], m.hiddenAt[poolA] = s, map[string]published{}, since.Add(time.Second)
	r := &Runner{Env: &Env{ChaosNodes: []string{poolA}}, Mon: m}
	var problems []string
	v := r.monitorVerdict(context.Background(), since, nil, func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }, func(string, ...any) {})
	if v.anomalies != 1 || len(problems) != 1 || !strings.Contains(problems[0], "incomplete") {
		t.Errorf("anomalies %d, problems %q; want one naming the incomplete pool", v.anomalies, problems)
	}
}
