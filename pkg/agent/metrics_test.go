package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestMetricsAfterSync(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-0")
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, nil); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP miglayout_agent_mig_devices MIG devices on the node after the last pass, by profile and state (free, in_use: allocated, prepared or running a process).
# TYPE miglayout_agent_mig_devices gauge
miglayout_agent_mig_devices{profile="1g.10gb",state="free"} 1
miglayout_agent_mig_devices{profile="2g.20gb",state="free"} 1
miglayout_agent_mig_devices{profile="3g.40gb",state="in_use"} 1
# HELP miglayout_agent_repartitions_total GPU repartitions attempted, by result phase (Ready, Blocked, Failed).
# TYPE miglayout_agent_repartitions_total counter
miglayout_agent_repartitions_total{result="Ready"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "miglayout_agent_mig_devices", "miglayout_agent_repartitions_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.phase); n != 3 {
		t.Errorf("%d phase histograms, want drain, repartition, republish", n)
	}
}

// TestUnreadableGPUsMetric: a GPU that falls off the bus is counted after
// the pass that finds it, and no longer once it is back.
func TestUnreadableGPUsMetric(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	ctx := context.Background()
	count := func(want string) {
		t.Helper()
		exp := `
# HELP miglayout_agent_unreadable_gpus GPUs NVML counts but cannot read after the last pass (fallen off the bus, no permission...: status reason GPUUnreadable); their devices are not published.
# TYPE miglayout_agent_unreadable_gpus gauge
miglayout_agent_unreadable_gpus ` + want + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "miglayout_agent_unreadable_gpus"); err != nil {
			t.Error(err)
		}
	}
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	count("1")
	if err := g.sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	count("0")
}

// TestStoppedStepIsNoNVMLError: a step the agent's stopping cancels (its
// context cancelled between NVML calls) leaves the GPU Pending, taken up
// again on the next start; it is neither a Failed repartition nor a
// counted NVML error.
func TestStoppedStepIsNoNVMLError(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	got := g.r.failure(fmt.Errorf("creating 3g.40gb@0: %w", context.Canceled))
	if got.Phase != v1alpha1.PhasePending || got.Reason != ReasonPassFailed {
		t.Errorf("result %+v, want Pending, %s", got, ReasonPassFailed)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.nvmlErrors); n != 0 {
		t.Errorf("%d NVML error series counted for a stopped step, want none", n)
	}
}
