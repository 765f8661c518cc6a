package agent

import (
	"fmt"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRepublicationWithPendingTaintsDroppedEndsThePass: the republication
// that ends a pass is answered with ErrDrainTaintsDropped (the devices a
// pending MIG mode change removes are published without their taint): the
// pool is published all the same, so the pass succeeds, its GPUs judged as
// NVML has them, rather than failing as a whole.
func TestRepublicationWithPendingTaintsDroppedEndsThePass(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.inv.failRepublish = fmt.Errorf("waiting for the API server to serve pool n1: %w", ErrDrainTaintsDropped)
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatalf("pass failed: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", got)
	}
	if len(res.GPUs) != 1 {
		t.Errorf("the pass returned %d GPUs, want NVML's one", len(res.GPUs))
	}
}
