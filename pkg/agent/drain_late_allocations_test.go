package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAllocatedAfterTheWithdrawalReadBlocks: two GPUs change; after the
// withdrawal's live read, while GPU 0 is repartitioned, a claim is given
// GPU 1's draining 3g.40gb@4 (a scheduler decision taken before it saw the
// withdrawal, for a claim that tolerates the drain taint), which the
// agent's cache does not show yet. The live read under GPU 1's lock finds
// it: GPU 1 is Blocked and keeps its devices; GPU 0 is changed.
func TestAllocatedAfterTheWithdrawalReadBlocks(t *testing.T) {
	const late = "gpu-1-mig-3g40gb-9-4"
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0,3g.40gb@4")
	g.alloc.live = sets.New[string]()
	g.locks.onBegin = func() { g.alloc.live = sets.New(late) } // the API server has it; the cache does not
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[1]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse {
		t.Errorf("GPU 1 %s/%s: %s; want Blocked/DeviceInUse", got.Phase, got.Reason, got.Message)
	}
	g.wantLayouts(t, "7g.80gb@0", "3g.40gb@0,3g.40gb@4")
}

// TestUnknownAllocationAtTheWithdrawalBlocks: an allocation under a name
// the agent does not publish ("gpu-0" while GPU 0 is in MIG mode: any of
// its devices may be the one held), which the API server shows at the live
// read after the withdrawal, blocks the GPU there, UnknownAllocation,
// before its lock is taken, as one shown at the re-check after the drain.
func TestUnknownAllocationAtTheWithdrawalBlocks(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.live = sets.New[string]()
	g.r.Inventory = &allocatedAtWithdrawal{fakeInventory: g.inv, alloc: g.alloc, dev: "gpu-0"}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonUnknownAllocation {
		t.Errorf("GPU 0 %s/%s: %s; want Blocked/UnknownAllocation", got.Phase, got.Reason, got.Message)
	}
	if len(g.locks.begun) != 0 {
		t.Errorf("GPU locks taken %v, want none: the withdrawal's read ends the GPU's work", g.locks.begun)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
}

// TestUnknownAllocationBeforeTheLockBlocks: while GPU 0 is repartitioned,
// an allocation appears under a name the agent does not publish: one of
// GPU 1 (another naming, or its whole-GPU name while it is in MIG mode) or
// of no GPU (any); the live read before GPU 1's lock finds it, and GPU 1 is
// Blocked, UnknownAllocation, its devices kept. A claim of a device of GPU
// 0 alone (destroyed there already) holds nothing of GPU 1.
func TestUnknownAllocationBeforeTheLockBlocks(t *testing.T) {
	for name, want1 := range map[string]string{
		"gpu-1-mig-foreign":    v1alpha1.ReasonUnknownAllocation,
		"gpu-1":                v1alpha1.ReasonUnknownAllocation,
		"foreign":              v1alpha1.ReasonUnknownAllocation,
		"gpu-0-mig-3g40gb-9-4": v1alpha1.ReasonLayoutApplied,
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "2xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.setup(t, 1, "3g.40gb@0,3g.40gb@4")
			g.alloc.live = sets.New[string]()
			g.locks.onBegin = func() {
				if len(g.locks.begun) == 1 { // GPU 0's lock
					g.alloc.live = sets.New(name)
				}
			}
			res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[1]; got.Reason != want1 {
				t.Errorf("GPU 1 %s/%s: %s; want %s", got.Phase, got.Reason, got.Message, want1)
			}
			want := []string{"7g.80gb@0", "7g.80gb@0"}
			if want1 == v1alpha1.ReasonUnknownAllocation {
				want[1] = "3g.40gb@0,3g.40gb@4"
			}
			g.wantLayouts(t, want...)
		})
	}
}
