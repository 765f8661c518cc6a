package agent

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestWithholdEmptiesDeviceGauges: a node whose GPUs another device
// manager hands out publishes no device, and its device gauges count none
// (counted free, they would show capacity no claim can be given); the
// next pass that publishes counts them again.
func TestWithholdEmptiesDeviceGauges(t *testing.T) {
	g, _ := metricsRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	specs := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	if _, err := g.r.Sync(context.Background(), specs, nil); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.devices); n != 1 {
		t.Fatalf("%d device series after a pass that publishes, want 1 (3g.40gb free)", n)
	}
	if _, err := g.r.Withhold(context.Background(), "the device plugin is on"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.devices); n != 0 {
		t.Errorf("%d device series while the node is withheld, want none", n)
	}
	if _, err := g.r.Sync(context.Background(), specs, nil); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(g.r.Metrics.devices.WithLabelValues("3g.40gb", "free")); got != 2 {
		t.Errorf("3g.40gb free = %v once published again, want 2", got)
	}
}
