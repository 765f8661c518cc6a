package controller

import (
	"sync"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics, served by the manager's metrics endpoint.
var (
	pendingDemand = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "miglayout_pending_pods",
		Help: "Pods the scheduler found unschedulable that wait for ResourceClaims, as the Auto planner last saw them.",
	})
	oldestPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "miglayout_pending_pods_oldest_creation_timestamp_seconds",
		Help: "Creation time (Unix seconds) of the oldest pod counted in miglayout_pending_pods, as the Auto planner last saw them (it looks again on each pod's change); 0 when none waits. Its age is time() minus this.",
	})
	plannerLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "miglayout_planner_duration_seconds",
		Help:    "Time to compute one Auto-mode plan.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	nodesMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "nodes",
		Help: "Nodes a MigLayout selects, by state (selected: all of them; ready, progressing, failed: a GPU cannot take its layout; blocked: a GPU change waits for a device in use to be released, or for a GPU reset; conflict; lost: the agent stopped renewing its heartbeat Lease; unreported: its agent has not reported the node; paused: spec.paused keeps it from the layout its rules ask for).",
	}, []string{"miglayout", "state"})
	pausedMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "paused",
		Help: "1 while the MigLayout's spec.paused is set (no change is started on its nodes), else 0.",
	}, []string{"miglayout"})
	gpuProblemsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "gpu_problems",
		Help: "GPUs whose desired layout cannot be computed (InvalidLayout, UnknownGPU), that the agent reports Blocked or Failed, or whose agent's passes have kept failing for 10 minutes (PassFailed), by reason.",
	}, []string{"miglayout", "reason"})
	specProblemsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "spec_problems",
		Help: "Parts of a MigLayout's spec that apply to nothing, by reason (InvalidSelector: the node selector does not parse, and nothing changes; NoNodes: it selects no node; RuleMatchesNoGPU, ProfileNotOffered, SparesNotHoldable: a rule or policy no reported GPU can take), as its Degraded condition lists them.",
	}, []string{"miglayout", "reason"})
	writesMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "nodemiglayout_writes_total",
		Help: "Writes of NodeMigLayout objects, by operation (create, update, adopt, delete; plan: an Auto plan's change or cancel written into a spec).",
	}, []string{"operation"})
	reclaimedMetric = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "idle_gpus_reclaimed_total",
		Help: "Changes written that give an idle GPU back as one whole device (policy.reclaimIdleGPUsAfterSeconds).",
	})
	schedulerDeclinedMetric = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "scheduler_declined_nodes_total",
		Help: "Nodes left out of a pending pod's Auto plans because free devices a plan gave it waited there for --auto-unbound-after and kube-scheduler did not bind it there.",
	})
	schedulerSteadyMetric = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "miglayout", Subsystem: "controller", Name: "scheduler_steady",
		Help: "1 while kube-scheduler's leader-election Lease (--scheduler-lease) shows a scheduler seen renewing it for --auto-unbound-after, or is not checked (none, or it cannot be read), so that Auto mode may leave nodes out of pods' plans; 0 while it holds that back. As last read; 1 before the first reading.",
	})
)

func init() {
	// Until the Lease is read (and where it is not checked), nothing
	// holds declines back.
	schedulerSteadyMetric.Set(1)
	metrics.Registry.MustRegister(nodesMetric, pausedMetric, gpuProblemsMetric, specProblemsMetric, writesMetric, reclaimedMetric, schedulerDeclinedMetric, schedulerSteadyMetric, pendingDemand, oldestPending, plannerLatency)
}

// recordPending sets the gauges of pending demand from a snapshot.
func recordPending(snap *planner.Snapshot) {
	pendingDemand.Set(float64(len(snap.Pending)))
	var oldest time.Time
	for _, p := range snap.Pending {
		if p.Pod == nil {
			continue
		}
		if c := p.Pod.CreationTimestamp.Time; oldest.IsZero() || c.Before(oldest) {
			oldest = c
		}
	}
	if oldest.IsZero() {
		oldestPending.Set(0)
		return
	}
	oldestPending.Set(float64(oldest.UnixNano()) / 1e9)
}

// recordMetrics sets the gauges of one MigLayout from its observation.
func recordMetrics(name string, obs Observation) {
	s := summarize(obs.Nodes)
	for state, n := range map[string]int32{
		"selected": s.selected, "ready": s.ready, "progressing": s.progressing,
		"failed": s.failed - s.blocked, "blocked": s.blocked, "conflict": s.conflict, "lost": s.lost,
		"unreported": s.silent, "paused": s.paused,
	} {
		nodesMetric.WithLabelValues(name, state).Set(float64(n))
	}
	paused := 0.0
	if obs.Paused {
		paused = 1
	}
	pausedMetric.WithLabelValues(name).Set(paused)
	counts := map[string]float64{} // by reason
	for _, n := range obs.Nodes {
		for _, p := range n.Problems {
			counts[p.Reason]++
		}
		for _, g := range n.Stuck {
			counts[stuckReason(g)]++
		}
	}
	gpuProblems.set(gpuProblemsMetric, name, counts)
	spec := map[string]float64{}
	if obs.SelectorErr != nil {
		spec[v1alpha1.ReasonInvalidSelector] = 1
	}
	for _, p := range obs.SpecProblems {
		spec[p.Reason]++
	}
	specProblems.set(specProblemsMetric, name, spec)
}

// reasonCounts are the reasons a gauge of counts by MigLayout and reason
// has a series of, per MigLayout.
type reasonCounts struct {
	mu sync.Mutex
	by map[string]map[string]float64
}

var (
	gpuProblems  reasonCounts // of gpuProblemsMetric
	specProblems reasonCounts // of specProblemsMetric
)

// set sets vec's counts of MigLayout name: each count at once, and the
// reasons gone since deleted, so that a scrape meanwhile never sees a
// count rebuilt from zero.
func (c *reasonCounts) set(vec *prometheus.GaugeVec, name string, counts map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for reason, n := range counts {
		vec.WithLabelValues(name, reason).Set(n)
	}
	for reason := range c.by[name] {
		if _, ok := counts[reason]; !ok {
			vec.DeleteLabelValues(name, reason)
		}
	}
	if c.by == nil {
		c.by = map[string]map[string]float64{}
	}
	c.by[name] = counts
}

// forget drops vec's series of MigLayout name.
func (c *reasonCounts) forget(vec *prometheus.GaugeVec, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vec.DeletePartialMatch(prometheus.Labels{"miglayout": name})
	delete(c.by, name)
}

// forgetMetrics drops the series of a deleted MigLayout.
func forgetMetrics(name string) {
	nodesMetric.DeletePartialMatch(prometheus.Labels{"miglayout": name})
	pausedMetric.DeleteLabelValues(name)
	gpuProblems.forget(gpuProblemsMetric, name)
	specProblems.forget(specProblemsMetric, name)
}
