package agent

import (
	"context"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNoRollbackOnGPUOfAnotherEntry: three A100s in MIG mode, an
// administrator's GPU instance split into small compute instances on GPU 2,
// which no entry names. GPU 0 leaves and NVML numbers GPU 2 as 1, whose
// entry was written for the GPU that was 1: that entry is not the split
// GPU's, which keeps its GPU instance (it is Blocked, SpecForAnotherGPU,
// and left as it is), rather than have it rolled back as one the agent
// manages.
func TestNoRollbackOnGPUOfAnotherEntry(t *testing.T) {
	ctx := context.Background()
	g := newRig(t, "3xA100-SXM4-80GB")
	before, err := g.mgr.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := g.mgr.SetMIGMode(ctx, i, true); err != nil {
			t.Fatal(err)
		}
	}
	g.splitGI(t, 2, 4)
	g.withoutGPU(t, 0)
	sp := spec(1, "7g.80gb@0")
	sp.UUID = before[1].UUID
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{sp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[1]; got.Reason != v1alpha1.ReasonSpecForAnotherGPU {
		t.Errorf("gpu 1: %s %s (%s), want reason %s", got.Phase, got.Reason, got.Message, v1alpha1.ReasonSpecForAnotherGPU)
	}
	if gis := g.sim.Snapshot().GPUs[2].GPUInstances; len(gis) == 0 {
		t.Errorf("the administrator's split GPU instance of the GPU numbered 1 now (its entry for %s) was destroyed", before[1].UUID)
	}
}
