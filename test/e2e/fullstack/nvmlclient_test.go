package fullstack

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestDeviceHeldByAnotherClient: a monitoring agent (DCGM, dcgm-exporter) holds a
// MIG device a new layout destroys, without a compute process, so no process list
// shows it and NVML refuses the destroy (IN_USE). The MigLayout turns Degraded,
// DeviceInUse, saying another NVML client holds the device; the device stays whole
// and published; once the client lets go, the layout is applied and the MigLayout is
// Ready.
func TestDeviceHeldByAnotherClient(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	const name = "e2e-held"
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	selector := map[string]string{groupLabel: "held"}
	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeHeld)

	sim, err := env.Cluster.Sim(nodeHeld)
	if err != nil {
		t.Fatal(err)
	}
	var held string // the UUID of 3g.40gb@4
	for _, gi := range gpuOf(sim.Snapshot(), 0).GPUInstances {
		if gi.Placement.Start == 4 && len(gi.ComputeInstances) == 1 {
			held = gi.ComputeInstances[0].UUID
		}
	}
	if held == "" {
		t.Fatalf("no 3g.40gb@4 with its compute instance on %s: %+v", nodeHeld, gpuOf(sim.Snapshot(), 0))
	}
	client, err := sim.OpenClient(held)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sim.CloseClient(client)
		}
	})

	ml = env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("whole", a100, map[string]int32{"7g.80gb": 1}))
	degraded := env.WaitMigLayout(t, ctx, name, ml.Generation, 60*time.Second, "Degraded, DeviceInUse", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDeviceInUse)
	})
	if c := clustertest.Condition(degraded.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || !strings.Contains(c.Message, "another NVML client holds it") {
		t.Errorf("Degraded %+v does not say another NVML client holds the device", c)
	}
	published := env.WaitPoolMatchesNVML(t, ctx, nodeHeld)
	var found bool
	for dev := range published {
		found = found || strings.HasPrefix(dev, "gpu-0-mig-3g40gb-") && strings.HasSuffix(dev, "-4")
	}
	if !found {
		t.Errorf("published %v, want the held 3g.40gb@4 still there", published)
	}

	closed = true
	if err := sim.CloseClient(client); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 1)
	if got := gpuOf(sim.Snapshot(), 0).Layout().String(); got != "7g.80gb@0" {
		t.Errorf("%s GPU 0 holds %q once the client let go, want 7g.80gb@0", nodeHeld, got)
	}
}
