package plugin

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the plugin's Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	xids *prometheus.CounterVec
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
	}
	if err := reg.Register(m.xids); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) xid(code uint64, action string) {
	if m == nil {
		return
	}
	m.xids.WithLabelValues(strconv.FormatUint(code, 10), action).Inc()
}
