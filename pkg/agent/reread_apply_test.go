package agent

import (
	"context"
	"sync"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSyncSkipsGPUCancelledWhileAnotherIsRepartitioned: two GPUs drain
// together, the specs are read again once after the settle period, then
// the GPUs are repartitioned one by one, each shown Repartitioning only
// when its turn comes. While GPU 0 is repartitioned (NVML calls take
// seconds), GPU 1 still shows Draining, which is what the Auto planner
// reads as "nothing destroyed yet": the pod its change was for is deleted
// and the planner cancels it (its desired layout back to 7g.80gb@0). The
// agent goes on with the spec it read before GPU 0's turn and destroys
// GPU 1's 7g.80gb for a layout nobody asks for; its next pass then
// destroys the 3g.40gb and makes the 7g.80gb again. Either the spec must
// be read again right before each GPU's NVML calls, or every GPU must be
// shown Repartitioning before the first one's calls begin.
func TestSyncSkipsGPUCancelledWhileAnotherIsRepartitioned(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.setup(t, 1, "7g.80gb@0")
	asked := []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "3g.40gb@4")}
	var mu sync.Mutex
	live := asked
	shown := map[int]v1alpha1.GPUPhase{}
	g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) {
		mu.Lock()
		defer mu.Unlock()
		return live, nil
	}
	cancelled := false
	g.locks.onBegin = func() {
		mu.Lock()
		defer mu.Unlock()
		// The planner's pass while GPU 0 is being repartitioned: GPU 1
		// shows Draining, so its change is cancelled.
		if !cancelled && shown[1] == v1alpha1.PhaseDraining {
			cancelled = true
			live = []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "7g.80gb@0")}
		}
	}
	report := func(idx int, r GPUResult) error {
		mu.Lock()
		defer mu.Unlock()
		shown[idx] = r.Phase
		return nil
	}
	if _, err := g.r.Sync(context.Background(), asked, report); err != nil {
		t.Fatal(err)
	}
	if !cancelled {
		return // GPU 1 showed Repartitioning before any NVML call: no cancel could be written
	}
	if got := g.layouts(t); got[1] != "7g.80gb@0" {
		t.Errorf("GPU 1 repartitioned to %q after its change was cancelled while it still showed Draining (GPU 0 was being repartitioned); want 7g.80gb@0 kept (layouts %v)", got[1], got)
	}
}
