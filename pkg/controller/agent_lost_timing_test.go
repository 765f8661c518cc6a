package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAgentLostTiming: an agent whose Lease is deleted is lost one default
// lease duration after the deletion was first seen, however many other
// Leases of the node go meanwhile; an agent whose Lease runs out without a
// renewal seen says since when, unless it was reported lost before this
// process saw the Lease.
func TestAgentLostTiming(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	type health struct {
		Lost    bool
		Message []string // substrings
	}
	tests := map[string]struct {
		steps func(l *AgentLeases, now *time.Time) health
		want  health
	}{
		"a stale Lease deleted after the agent's own gives no more time": {
			steps: func(l *AgentLeases, now *time.Time) health {
				lease := agentLease("n1", start, 40)
				l.Observe(lease)
				l.deleted("n1", lease.Name)
				*now = start.Add(30 * time.Second)
				l.deleted("n1", "miglayout-agent-stale")
				*now = start.Add(defaultAgentLeaseDuration)
				h := l.Health("n1", nil, true, false)
				return health{Lost: h.Lost}
			},
			want: health{Lost: true},
		},
		"a Lease first seen that runs out says since when": {
			steps: func(l *AgentLeases, now *time.Time) health {
				lease := agentLease("n1", start, 40)
				l.Observe(lease)
				*now = start.Add(41 * time.Second)
				h := l.Health("n1", lease, true, false)
				return health{Lost: h.Lost, Message: contained(h.Message, "has not renewed its heartbeat Lease", "since 2026-11-30T10:00:00Z", "was reported lost")}
			},
			want: health{Lost: true, Message: []string{"has not renewed its heartbeat Lease", "since 2026-11-30T10:00:00Z"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := start
			l := &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return now }}
			if diff := cmp.Diff(tc.want, tc.steps(l, &now)); diff != "" {
				t.Errorf("agent health (-want +got):\n%s", diff)
			}
		})
	}
}

// contained returns those of subs that s contains.
func contained(s string, subs ...string) []string {
	var out []string
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			out = append(out, sub)
		}
	}
	return out
}
