package agent

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPendingEnableSetAgainIsNotDescribedAsCancelled: an Ampere GPU's MIG
// enable the spec asks for is pending (set while a process ran); once the
// GPU is idle the pass sets the mode again and goes on to the layout. What
// the GPU shows in flight says MIG is enabled, never that the pending
// change is cancelled: it is the change the spec asks for.
func TestPendingEnableSetAgainIsNotDescribedAsCancelled(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := t.Context()
	pid := g.pendEnable(t)
	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	var shown, repartitioning []string
	report := func(idx int, res GPUResult) error {
		shown = append(shown, string(res.Phase)+": "+res.Message)
		if res.Phase == v1alpha1.PhaseRepartitioning {
			repartitioning = append(repartitioning, res.Message)
		}
		return nil
	}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, report)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Fatalf("once idle: %+v, want Ready", got)
	}
	if len(repartitioning) == 0 {
		t.Fatalf("the GPU was never shown Repartitioning (shown %q)", shown)
	}
	for _, s := range repartitioning {
		if !strings.Contains(s, "enable MIG") {
			t.Errorf("shown Repartitioning %q, want it to say MIG is enabled", s)
		}
	}
	for _, s := range shown {
		if strings.Contains(s, "cancel") {
			t.Errorf("shown %q while the pending enable the spec asks for is set again, not cancelled", s)
		}
	}
}
