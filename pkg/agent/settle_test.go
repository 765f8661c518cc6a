package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDrainWaitsSettlePeriod: a pass that must destroy devices publishes
// their drain taints, then waits the settle period (scheduling decisions
// made before the taint was seen land meanwhile) with the devices still
// there, and only then destroys them; a pass that destroys nothing does
// not wait.
func TestDrainWaitsSettlePeriod(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.r.SettlePeriod = 7 * time.Second
	type wait struct {
		d         time.Duration
		drained   bool   // a drain publication came before it
		layoutNow string // the GPU's layout while waiting
	}
	var waits []wait
	g.r.Sleep = func(ctx context.Context, d time.Duration) error {
		drained := slices.ContainsFunc(g.inv.pubs, func(p publication) bool { return len(p.draining) > 0 })
		waits = append(waits, wait{d, drained, g.layouts(t)[0]})
		return nil
	}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseReady {
		t.Fatalf("result %+v", r)
	}
	want := []wait{{7 * time.Second, true, "3g.40gb@0,3g.40gb@4"}}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %+v, want %+v: the settle period after the drain, before anything is destroyed", waits, want)
	}
	waits = nil
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 0 {
		t.Errorf("a pass with nothing to destroy waited %+v", waits)
	}
}
