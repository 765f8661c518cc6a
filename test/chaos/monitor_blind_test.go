package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
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
			_, _, anomalies := r.monitorVerdict(context.Background(), since, problem, problem)
			if anomalies != tc.anomalies {
				t.Errorf("anomalies %d, want %d (problems %q)", anomalies, tc.anomalies, problems)
			}
			if tc.anomalies > 0 && (len(problems) != 1 || !strings.Contains(problems[0], "connection refused")) {
				t.Errorf("problems %q, want one naming the last poll error", problems)
			}
		})
	}
}
