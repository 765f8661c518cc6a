package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecordMetricsCountsNodeStates: the nodes gauge counts each state,
// lost agents included, and a deleted MigLayout's series go.
func TestRecordMetricsCountsNodeStates(t *testing.T) {
	const name = "metrics-test"
	t.Cleanup(func() { forgetMetrics(name) })
	recordMetrics(name, Observation{Nodes: []NodeState{readyNode("a"), lostNode("b"), lostNode("c"), blockedNode("d")}})
	for state, want := range map[string]float64{"selected": 4, "ready": 1, "lost": 2, "failed": 1, "progressing": 0} {
		if got := testutil.ToFloat64(nodesMetric.WithLabelValues(name, state)); got != want {
			t.Errorf("nodes{state=%q} = %v, want %v", state, got, want)
		}
	}
	forgetMetrics(name)
	if n := nodesMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name}); n != 0 {
		t.Errorf("%d series left after forgetMetrics", n)
	}
}
