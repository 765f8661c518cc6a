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
	marks *marksCollector
}

// newMetrics creates the metrics and registers them with reg; nil reg: no
// metrics. marks counts the Xid marks held, by GPU index and Xid.
func newMetrics(reg prometheus.Registerer, marks func() map[markKey]int) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		xids: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "miglayout_plugin_xid_errors_total",
			Help: "Xid critical errors NVML reported on the node's GPUs, by Xid and action (unhealthy: the devices it hit are reported Unhealthy to the kubelet and published tainted; ignored: an Xid of the ignored list, put down to the application; unattributed: NVML could not name the GPU, or the GPU instance it names has no MIG device).",
		}, []string{"xid", "action"}),
		marks: &marksCollector{read: marks, desc: prometheus.NewDesc("miglayout_plugin_xid_marks",
			"Xid marks held now, by GPU index and Xid: the devices they name are reported Unhealthy and published with the taint miglayout.io/xid until the node reboots or kubectl miglayout clear-xids clears them (a mark of the whole GPU counts 1, as does each marked MIG device). Restored after a restart of the agent.",
			[]string{"gpu", "xid"}, nil)},
	}
	for _, c := range []prometheus.Collector{m.xids, m.marks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	return m, nil
}

// markKey is a series of miglayout_plugin_xid_marks.
type markKey struct {
	gpu int
	xid uint64
}

// marksCollector reports the Xid marks held as gauges, read at each
// scrape, so that a scrape never sees a change half made.
type marksCollector struct {
	desc *prometheus.Desc
	read func() map[markKey]int
}

func (c *marksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *marksCollector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strconv.Itoa(k.gpu), strconv.FormatUint(k.xid, 10))
	}
}

func (m *metrics) xid(code uint64, action string) {
	if m == nil {
		return
	}
	m.xids.WithLabelValues(strconv.FormatUint(code, 10), action).Inc()
}
