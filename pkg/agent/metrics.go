package agent

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// Metrics are the agent's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	repartitions *prometheus.CounterVec
	phase        *prometheus.HistogramVec
	nvmlErrors   *prometheus.CounterVec
	devices      *prometheus.GaugeVec
	bindings     *prometheus.CounterVec
	unreadable   prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (for example
// controller-runtime's metrics.Registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		repartitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_repartitions_total",
			Help: "GPU repartitions attempted, by result phase (Ready, Blocked, Failed).",
		}, []string{"result"}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "miglayout_agent_phase_duration_seconds",
			Help:    "Duration of the drain, repartition and republish phases.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"phase"}),
		nvmlErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_nvml_errors_total",
			Help: "NVML errors met while repartitioning, by NVML return code.",
		}, []string{"code"}),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "miglayout_agent_mig_devices",
			Help: "MIG devices on the node after the last pass, by profile and state (free, in_use: allocated, prepared or running a process).",
		}, []string{"profile", "state"}),
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_binding_decisions_total",
			Help: "Allocations of devices published with binding conditions that the agent answered, by result (ready: confirmed; refused: the device was being drained or was gone).",
		}, []string{"result"}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "miglayout_agent_unreadable_gpus",
			Help: "GPUs NVML counts but cannot read after the last pass (fallen off the bus, no permission...: status reason GPUUnreadable); their devices are not published.",
		}),
	}
	reg.MustRegister(m.repartitions, m.phase, m.nvmlErrors, m.devices, m.bindings, m.unreadable)
	return m
}

func (m *Metrics) setUnreadable(n int) {
	if m != nil {
		m.unreadable.Set(float64(n))
	}
}

func (m *Metrics) observePhase(phase string, d time.Duration) {
	if m != nil {
		m.phase.WithLabelValues(phase).Observe(d.Seconds())
	}
}

func (m *Metrics) countBinding(result string) {
	if m != nil {
		m.bindings.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) countRepartition(result v1alpha1.GPUPhase) {
	if m != nil {
		m.repartitions.WithLabelValues(string(result)).Inc()
	}
}

func (m *Metrics) countNVMLError(err error) {
	if m == nil {
		return
	}
	code := "none"
	if ret, ok := gpu.ReturnCode(err); ok {
		code = strconv.Itoa(int(ret))
	} else if errors.Is(err, gpu.ErrInsufficientResources) {
		code = "refused"
	}
	m.nvmlErrors.WithLabelValues(code).Inc()
}

// recordDevices sets the per-profile device gauges from a pass's result.
func (m *Metrics) recordDevices(res *SyncResult) {
	if m == nil {
		return
	}
	m.devices.Reset()
	for _, g := range res.GPUs {
		inUse := res.InUse[g.GPU.Index]
		for _, d := range g.Devices {
			if d.CIID < 0 {
				continue
			}
			state := "free"
			if inUse.Contains(d.Device()) {
				state = "in_use"
			}
			m.devices.WithLabelValues(d.Profile, state).Inc()
		}
	}
}
