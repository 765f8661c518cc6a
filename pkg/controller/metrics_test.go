package controller

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecordMetricsCountsNodeStates: the nodes gauge counts each state,
// lost agents, nodes Blocked on a device in use (apart from failed ones)
// and nodes whose agent never reported included, so that every selected
// node is in one state an alert can see; a deleted MigLayout's series go.
func TestRecordMetricsCountsNodeStates(t *testing.T) {
	const name = "metrics-test"
	t.Cleanup(func() { forgetMetrics(name) })
	recordMetrics(name, Observation{Paused: true, Nodes: []NodeState{readyNode("a"), lostNode("b"), lostNode("c"), blockedNode("d"), invalidNode("e"), silentNode("f"), pausedNode("g", false)}})
	for state, want := range map[string]float64{"selected": 7, "ready": 1, "lost": 2, "blocked": 1, "failed": 1, "unreported": 1, "progressing": 0, "conflict": 0, "paused": 1} {
		if got := testutil.ToFloat64(nodesMetric.WithLabelValues(name, state)); got != want {
			t.Errorf("nodes{state=%q} = %v, want %v", state, got, want)
		}
	}
	if got := testutil.ToFloat64(pausedMetric.WithLabelValues(name)); got != 1 {
		t.Errorf("paused = %v, want 1", got)
	}
	recordMetrics(name, Observation{Nodes: []NodeState{readyNode("a")}})
	if got := testutil.ToFloat64(pausedMetric.WithLabelValues(name)); got != 0 {
		t.Errorf("paused = %v once resumed, want 0", got)
	}
	forgetMetrics(name)
	if n := nodesMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name}) + pausedMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name}); n != 0 {
		t.Errorf("%d series left after forgetMetrics", n)
	}
}

// TestGPUProblemsNeverPartlyCounted: scrapes while a MigLayout's
// observations are recorded see each reason fully counted (a count is set
// at once, not rebuilt from zero), and a reason gone leaves the gauge.
func TestGPUProblemsNeverPartlyCounted(t *testing.T) {
	const name = "problems-test"
	t.Cleanup(func() { forgetMetrics(name) })
	blocked := Observation{Nodes: []NodeState{blockedNode("a"), blockedNode("b"), blockedNode("c"), invalidNode("d")}}
	recordMetrics(name, blocked)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			recordMetrics(name, blocked)
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpuProblemsMetric)
	// inUse scrapes the DeviceInUse count of the MigLayout (0: no series).
	inUse := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["miglayout"] == name && labels["reason"] == v1alpha1.ReasonDeviceInUse {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	for scrapes := 0; ; scrapes++ {
		select {
		case <-done:
			recordMetrics(name, Observation{Nodes: []NodeState{invalidNode("d")}})
			if n := gpuProblemsMetric.DeleteLabelValues(name, v1alpha1.ReasonDeviceInUse); n {
				t.Error("a reason no node has any more keeps its series")
			}
			if got := testutil.ToFloat64(gpuProblemsMetric.WithLabelValues(name, v1alpha1.ReasonInvalidLayout)); got != 1 {
				t.Errorf("InvalidLayout problems = %v, want 1", got)
			}
			return
		default:
		}
		if got := inUse(); got != 3 {
			t.Fatalf("scrape %d during observations of three GPUs in use: %v", scrapes, got)
		}
	}
}
