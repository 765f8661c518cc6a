package plugin

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the plugin's Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	xids  *prometheus.CounterVec
	marks *prometheus.GaugeVec
}

// newMetrics creates the metrics and registers them with reg; nil reg: no
// metrics.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		xids: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_plugin_xid_errors_total",
			Help: "Xid critical errors NVML reported on the node's GPUs, by Xid and action (unhealthy: the devices it hit are reported Unhealthy to the kubelet and published tainted; ignored: an Xid of the ignored list, put down to the application; unattributed: NVML could not name the GPU, or the GPU instance it names has no MIG device).",
		}, []string{"xid", "action"}),
		marks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "miglayout_plugin_xid_marks",
			Help: "Xid marks held now, by GPU index and Xid: the devices they name are reported Unhealthy and published with the taint miglayout.io/xid until the node reboots or kubectl miglayout clear-xids clears them (a mark of the whole GPU counts 1, as does each marked MIG device). Restored after a restart of the agent.",
		}, []string{"gpu", "xid"}),
	}
	for _, c := range []prometheus.Collector{m.xids, m.marks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	return m, nil
}

// setMarks sets the marks gauge from the marks held (xidMu held).
func (m *metrics) setMarks(gpus map[int]xidMark, devices map[string]xidMark) {
	if m == nil {
		return
	}
	m.marks.Reset()
	for idx, mk := range gpus {
		m.marks.WithLabelValues(strconv.Itoa(idx), strconv.FormatUint(mk.code, 10)).Inc()
	}
	for _, mk := range devices {
		m.marks.WithLabelValues(strconv.Itoa(mk.gpuIndex), strconv.FormatUint(mk.code, 10)).Inc()
	}
}

func (m *metrics) xid(code uint64, action string) {
	if m == nil {
		return
	}
	m.xids.WithLabelValues(strconv.FormatUint(code, 10), action).Inc()
}
