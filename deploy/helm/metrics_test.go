package helm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	_ "github.com/miglayout/miglayout/pkg/controller" // registers the controller's metrics
	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

// The chart's metrics ports (Services, scrape annotations) serve
// controller-runtime's metrics.Registry: the agent's metrics must be
// registered there by agent.NewMetrics(metrics.Registry), as
// cmd/miglayout-agent does, and the controller's by pkg/controller.

// agentMetrics and controllerMetrics are the families each component must
// register. A vector without series yet is registered but not exported.
var (
	agentMetrics = []string{
		"miglayout_agent_repartitions_total",
		"miglayout_agent_phase_duration_seconds",
		"miglayout_agent_nvml_errors_total",
	}
	controllerMetrics = []string{
		"miglayout_controller_nodes",
		"miglayout_controller_gpu_problems",
		"miglayout_controller_nodemiglayout_writes_total",
		"miglayout_pending_pods",
		"miglayout_planner_duration_seconds",
		"miglayout_controller_scheduler_steady",
	}
)

// registered reports whether a collector with the given fully-qualified name
// is registered in reg: registering another one under that name then fails.
func registered(reg prometheus.Registerer, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe for a registered name"})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

// scrape reads the registry over HTTP in the Prometheus text format, as a
// scraper of the metrics endpoint does, and returns the families it exports.
func scrape(t *testing.T) (map[string]bool, string) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			families[name] = true
		}
	}
	return families, string(body)
}

type pool struct{}

func (pool) Publish(context.Context, []agent.GPUState, sets.Set[string]) error { return nil }
func (pool) DeviceName(g gpu.GPU, d *gpu.MIGDevice) string {
	if d == nil {
		return slices.GPUDeviceName(g.Index)
	}
	return slices.MIGDeviceName(g.Index, d.Profile, d.ProfileID, d.Placement.Start)
}

type none struct{}

func (none) AllocatedDevices(context.Context, bool) (sets.Set[string], error) {
	return sets.New[string](), nil
}
func (none) PreparedDevices() sets.Set[string] { return sets.New[string]() }

func TestMetricsInControllerRuntimeRegistry(t *testing.T) {
	m := agent.NewMetrics(metrics.Registry)

	// One repartition of a simulated H100 records a result and the phases.
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := gpu.NewNVML(sim, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Shutdown()
	journal, err := agent.OpenJournal(filepath.Join(t.TempDir(), "journal.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &agent.Repartitioner{GPUs: mgr, Inventory: pool{}, Allocations: none{}, Prepared: none{}, Locks: gpulock.New(),
		Journal: journal, Metrics: m, Driver: slices.DefaultDriverName,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	res, err := r.Sync(context.Background(), []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sync: %+v", res)

	families, text := scrape(t)
	for _, name := range []string{"miglayout_agent_repartitions_total", "miglayout_agent_phase_duration_seconds"} {
		if !families[name] {
			t.Errorf("the metrics endpoint does not serve %s after a repartition", name)
		}
	}
	if !strings.Contains(text, `miglayout_agent_repartitions_total{result="Ready"} 1`) {
		t.Errorf("no Ready repartition counted:\n%s", grep(text, "miglayout_agent_repartitions_total"))
	}
	for _, phase := range []string{"repartition", "republish"} {
		if !strings.Contains(text, `miglayout_agent_phase_duration_seconds_count{phase="`+phase+`"} 1`) {
			t.Errorf("no %s phase observed:\n%s", phase, grep(text, "miglayout_agent_phase_duration_seconds_count"))
		}
	}
	for _, name := range append(append([]string(nil), agentMetrics...), controllerMetrics...) {
		if !families[name] && !registered(metrics.Registry, name) {
			t.Errorf("%s is not registered in controller-runtime's metrics.Registry", name)
		}
	}
	// controller-runtime's own metrics are there too (the same endpoint).
	if !families["controller_runtime_reconcile_total"] && !registered(metrics.Registry, "controller_runtime_reconcile_total") {
		t.Error("controller-runtime's metrics are missing from the registry")
	}
}

func grep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
