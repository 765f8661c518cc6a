package agent

import (
	"errors"
	"strconv"
	"sync"
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
	failedPasses prometheus.Counter
	orphans      prometheus.Counter
	restored     prometheus.Counter
	poolDeleted  prometheus.Counter

	// devicesMu guards deviceLabels: the label sets of devices the last
	// pass set (recordDevices).
	devicesMu    sync.Mutex
	deviceLabels map[[2]string]float64
}

// NewMetrics creates the metrics and registers them with reg (for example
// controller-runtime's metrics.Registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		repartitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_repartitions_total",
			Help: "GPU repartitions attempted, by result phase (Ready, Blocked, Failed; Pending where the agent stopped during one, or where it stopped on an error that is not NVML's: PassFailed).",
		}, []string{"result"}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "miglayout_agent_phase_duration_seconds",
			Help:    "Duration of the drain, repartition and republish phases.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"phase"}),
		nvmlErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_nvml_errors_total",
			Help: "NVML errors met while repartitioning, by NVML return code (refused: a create at a start its profile does not allow, refused before NVML is called, while a create NVML refuses for want of room counts under its code, 23 for ERROR_INSUFFICIENT_RESOURCES; other: an error of the GPU manager without a return code, e.g. NVML's answers disagreeing with the profile catalog). Errors of the API server or the agent's own state are not counted here (miglayout_agent_failed_passes_total, the GPU's status).",
		}, []string{"code"}),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "miglayout_agent_mig_devices",
			Help: "MIG devices on the node after the last pass, by profile and state (free, in_use: allocated, prepared or running a process, or kept as if it were: every device of a GPU whose processes NVML could not list or that an allocation the agent cannot resolve may hold); none while the node publishes no device because another device manager hands its GPUs out (DevicePluginActive).",
		}, []string{"profile", "state"}),
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_agent_binding_decisions_total",
			Help: "Allocations of devices published with binding conditions that the agent answered, by result (ready: confirmed; refused: the device was being drained or was gone).",
		}, []string{"result"}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "miglayout_agent_unreadable_gpus",
			Help: "GPUs NVML counts but cannot read, as last observed (fallen off the bus, no permission...: status reason GPUUnreadable); their devices are not published.",
		}),
		failedPasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "miglayout_agent_failed_passes_total",
			Help: "Passes that stopped before the node's pool was published (NVML could not read the GPUs, the API server refused a publication...), and GPU changes that stopped on an error that is not NVML's (the API server could not be read: the GPU is Pending, PassFailed); the agent retries them with backoff. A stop of the agent is not counted.",
		}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "miglayout_agent_orphaned_claims_released_total",
			Help: "Preparations of ResourceClaims that no longer exist or no longer hold a device of the node, which the kubelet never unprepared, released by the agent (event OrphanedClaimReleased).",
		}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "miglayout_agent_restored_devices_total",
			Help: "MIG devices made again because ResourceClaims hold them but the GPU lost them (a reboot, a driver reload or a GPU reset destroys GPU instances).",
		}),
		poolDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "miglayout_agent_pool_deletions_total",
			Help: "Times the node's pool was found without a ResourceSlice, deleted by someone else (the kubelet when it starts, or once the DRA plugin was unreachable for 30 s; or by hand), and published again at once.",
		}),
	}
	reg.MustRegister(m.repartitions, m.phase, m.nvmlErrors, m.devices, m.bindings, m.unreadable, m.failedPasses, m.orphans, m.restored, m.poolDeleted)
	return m
}

func (m *Metrics) setUnreadable(n int) {
	if m != nil {
		m.unreadable.Set(float64(n))
	}
}

func (m *Metrics) countOrphanReleased() {
	if m != nil {
		m.orphans.Inc()
	}
}

func (m *Metrics) countPoolDeleted() {
	if m != nil {
		m.poolDeleted.Inc()
	}
}

func (m *Metrics) countRestored(n int) {
	if m != nil {
		m.restored.Add(float64(n))
	}
}

func (m *Metrics) countFailedPass() {
	if m != nil {
		m.failedPasses.Inc()
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

// countNVMLError counts err under its NVML return code, as refused (a
// create at a start its profile does not allow, mig.ErrInvalidLayout,
// refused before NVML is called), or as
// other (an error of the GPU manager without a return code, e.g. NVML's
// answers disagreeing with the catalog, a profile it does not offer); an error that
// is not NVML's or the GPU manager's (gpu.IsNVMLError: the API server's, a
// lock's) is not counted.
func (m *Metrics) countNVMLError(err error) {
	if m == nil {
		return
	}
	var code string
	if ret, ok := gpu.ReturnCode(err); ok {
		code = strconv.Itoa(int(ret))
	} else if errors.Is(err, gpu.ErrInsufficientResources) {
		code = "refused"
	} else if gpu.IsNVMLError(err) {
		code = "other"
	} else {
		return
	}
	m.nvmlErrors.WithLabelValues(code).Inc()
}

// recordDevices sets the per-profile device gauges from a pass's result:
// each count is set at once and the label sets the pass no longer has are
// deleted, so that a scrape meanwhile sees each count as it was or as it
// is, never partly counted.
func (m *Metrics) recordDevices(res *SyncResult) {
	if m == nil {
		return
	}
	counts := map[[2]string]float64{} // profile, state
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
			counts[[2]string{d.Profile, state}]++
		}
	}
	m.devicesMu.Lock()
	defer m.devicesMu.Unlock()
	for k, n := range counts {
		m.devices.WithLabelValues(k[0], k[1]).Set(n)
	}
	for k := range m.deviceLabels {
		if _, ok := counts[k]; !ok {
			m.devices.DeleteLabelValues(k[0], k[1])
		}
	}
	m.deviceLabels = counts
}
