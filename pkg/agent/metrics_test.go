package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

func TestMetricsAfterSync(t *testing.T) {
	g, reg := metricsRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-0")
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, nil); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP miglayout_agent_mig_devices MIG devices on the node after the last pass, by profile and state (free, in_use: allocated, prepared or running a process, or kept as if it were: every device of a GPU whose processes NVML could not list or that an allocation the agent cannot resolve may hold); none while the node publishes no device because another device manager hands its GPUs out (DevicePluginActive).
# TYPE miglayout_agent_mig_devices gauge
miglayout_agent_mig_devices{profile="1g.10gb",state="free"} 1
miglayout_agent_mig_devices{profile="2g.20gb",state="free"} 1
miglayout_agent_mig_devices{profile="3g.40gb",state="in_use"} 1
# HELP miglayout_agent_repartitions_total GPU repartitions attempted, by result phase (Ready, Blocked, Failed; Pending where the agent stopped during one, or where it stopped on an error that is not NVML's: PassFailed).
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
	g, reg := metricsRig(t, "2xA100-SXM4-80GB")
	ctx := context.Background()
	count := func(want string) {
		t.Helper()
		exp := `
# HELP miglayout_agent_unreadable_gpus GPUs NVML counts but cannot read, as last observed (fallen off the bus, no permission...: status reason GPUUnreadable); their devices are not published.
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
	g, _ := metricsRig(t, "1xA100-SXM4-80GB")
	got := g.r.failure(fmt.Errorf("creating 3g.40gb@0: %w", context.Canceled))
	if got.Phase != v1alpha1.PhasePending || got.Reason != ReasonPassFailed {
		t.Errorf("result %+v, want Pending, %s", got, ReasonPassFailed)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.nvmlErrors); n != 0 {
		t.Errorf("%d NVML error series counted for a stopped step, want none", n)
	}
}

// TestUnreadableGPUsMetricOnFailedPass: a GPU found unreadable is counted
// even where the pass then fails (here the API server refuses the drain
// publication), so that the unreadable-GPU alert does not wait for a pass
// that succeeds.
func TestUnreadableGPUsMetricOnFailedPass(t *testing.T) {
	g, _ := metricsRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.inv.failDrain = errors.New("admission webhook denied the request")
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
		t.Fatal("the pass succeeded although its drain publication was refused")
	}
	if got := testutil.ToFloat64(g.r.Metrics.unreadable); got != 1 {
		t.Errorf("miglayout_agent_unreadable_gpus = %v after a failed pass that found GPU 1 lost, want 1", got)
	}
}

// TestNVMLErrorsCountsOnlyNVML: miglayout_agent_nvml_errors_total counts
// what NVML returned, by return code, creates refused for want of room, and
// the GPU manager's errors without a code (the GPU Failed, NVMLError, each
// counted: the NVML-errors alert tells of every such GPU); an error of the API server stopping a GPU's
// change is not counted there, leaves the GPU Pending (PassFailed) and
// counts as a failed pass.
func TestNVMLErrorsCountsOnlyNVML(t *testing.T) {
	tests := map[string]struct {
		err    error
		want   map[string]float64
		phase  v1alpha1.GPUPhase
		reason string
		passes float64
	}{
		"NVML return code": {
			err:   fmt.Errorf("creating GPU instance: %w", &gpu.NVMLError{Op: "CreateGpuInstanceWithPlacement", Return: nvml.ERROR_UNKNOWN}),
			want:  map[string]float64{strconv.Itoa(int(nvml.ERROR_UNKNOWN)): 1},
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonNVMLError,
		},
		"refused for want of room": {
			err:   fmt.Errorf("creating 3g.40gb@4: %w", gpu.ErrInsufficientResources),
			want:  map[string]float64{"refused": 1},
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonNVMLError,
		},
		"the GPU manager's, without a return code": {
			err:   fmt.Errorf("creating 3g.40gb@4: %w: the catalog gives GI profile ID 9, NVML reports 5", gpu.ErrNotSupported),
			want:  map[string]float64{"other": 1},
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonNVMLError,
		},
		"API server": {
			err:   fmt.Errorf("reading ResourceClaim allocations: %w", apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "", errors.New("RBAC"))),
			want:  map[string]float64{},
			phase: v1alpha1.PhasePending, reason: ReasonPassFailed, passes: 1,
		},
		"API server timed out": {
			err:   fmt.Errorf("reading ResourceClaim allocations: %w", context.DeadlineExceeded),
			want:  map[string]float64{},
			phase: v1alpha1.PhasePending, reason: ReasonPassFailed, passes: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			r := &Repartitioner{Metrics: m}
			if got := r.failure(tc.err); got.Phase != tc.phase || got.Reason != tc.reason {
				t.Errorf("result %s/%s, want %s/%s", got.Phase, got.Reason, tc.phase, tc.reason)
			}
			if got := testutil.ToFloat64(m.failedPasses); got != tc.passes {
				t.Errorf("failed passes counted %v, want %v", got, tc.passes)
			}
			got := map[string]float64{}
			for _, code := range []string{strconv.Itoa(int(nvml.ERROR_UNKNOWN)), "refused", "other"} {
				if v := testutil.ToFloat64(m.nvmlErrors.WithLabelValues(code)); v > 0 {
					got[code] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NVML errors counted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFailedPassesMetric: a pass that stops before publishing (the drain
// publication refused) is counted; a pass that publishes is not.
func TestFailedPassesMetric(t *testing.T) {
	g, _ := metricsRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	rec, _, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	g.inv.failDrain = errors.New("admission webhook denied the request")
	if _, err := rec.Reconcile(context.Background(), req); err == nil {
		t.Fatal("the pass succeeded although its drain publication was refused")
	}
	if got := testutil.ToFloat64(g.r.Metrics.failedPasses); got != 1 {
		t.Errorf("miglayout_agent_failed_passes_total = %v after a failed pass, want 1", got)
	}
	g.inv.failDrain = nil
	if _, err := rec.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(g.r.Metrics.failedPasses); got != 1 {
		t.Errorf("miglayout_agent_failed_passes_total = %v after a pass that published, want still 1", got)
	}
}

// metricsRig is newRig(t, spec) whose repartitioner records its metrics in
// a registry of its own, returned with it.
func metricsRig(t *testing.T, spec string) (*rig, *prometheus.Registry) {
	t.Helper()
	g := newRig(t, spec)
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	return g, reg
}

// TestDeviceGaugesNeverPartlyCounted: scrapes while passes record the
// devices see every device counted (a count is set at once, not rebuilt
// from zero), and a profile gone from the node leaves the gauges.
func TestDeviceGaugesNeverPartlyCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	state := func(profiles ...string) *SyncResult {
		g := GPUState{GPU: gpu.GPU{Index: 0}}
		for i, p := range profiles {
			g.Devices = append(g.Devices, gpu.MIGDevice{Profile: p, CIID: 0, GIID: i})
		}
		return &SyncResult{GPUs: []GPUState{g}}
	}
	seven := state("1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")
	m.recordDevices(seven)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			m.recordDevices(seven)
		}
	}()
	for scrapes := 0; ; scrapes++ {
		select {
		case <-done:
			if scrapes == 0 {
				t.Log("no scrape ran during the passes")
			}
			m.recordDevices(state("7g.80gb"))
			want := `
# HELP miglayout_agent_mig_devices MIG devices on the node after the last pass, by profile and state (free, in_use: allocated, prepared or running a process, or kept as if it were: every device of a GPU whose processes NVML could not list or that an allocation the agent cannot resolve may hold); none while the node publishes no device because another device manager hands its GPUs out (DevicePluginActive).
# TYPE miglayout_agent_mig_devices gauge
miglayout_agent_mig_devices{profile="7g.80gb",state="free"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "miglayout_agent_mig_devices"); err != nil {
				t.Error(err)
			}
			return
		default:
		}
		if got := testutil.ToFloat64(m.devices.WithLabelValues("1g.10gb", "free")); got != 7 {
			t.Fatalf("scrape %d during passes that each find seven free 1g.10gb: %v", scrapes, got)
		}
	}
}
