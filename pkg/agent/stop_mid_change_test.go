package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// stopAfterDestroys stops the agent (cancels the pass's context, as SIGTERM
// does) once n destroys have returned.
type stopAfterDestroys struct {
	gpu.Manager
	stop func()
	n    int
}

func (s *stopAfterDestroys) DestroyMIGDevice(ctx context.Context, idx int, d mig.Device) error {
	err := s.Manager.DestroyMIGDevice(ctx, idx, d)
	if s.n--; s.n == 0 {
		s.stop()
	}
	return err
}

// TestStopMidChangeKeepsDevicesToDestroyWithdrawn: an agent stopped after
// destroying the first of a GPU's two devices (going to MIG off, or to one
// whole device) publishes last the pool without the device still to
// destroy, as a killed agent leaves it (withdrawn), not that device
// untainted for a claim to take before the next agent drains it; the next
// agent finishes the change.
func TestStopMidChangeKeepsDevicesToDestroyWithdrawn(t *testing.T) {
	for name, spec := range map[string]v1alpha1.GPUSpec{
		"to one device": {Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"},
		"to MIG off":    {Index: 0, MIGEnabled: false},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			ctx, stop := context.WithCancel(t.Context())
			g.r.GPUs = &stopAfterDestroys{Manager: g.mgr, stop: stop, n: 1}
			_, _ = g.r.Sync(ctx, []v1alpha1.GPUSpec{spec}, nil)
			left := g.layouts(t)
			if len(left) != 1 {
				t.Fatalf("layouts after the stop: %v, want one device destroyed of two", left)
			}
			last := g.inv.last()
			for _, d := range last.devices {
				if slices.Contains(last.draining, d) {
					continue
				}
				t.Errorf("last publication before the stop: %s published untainted (devices %v), want the device still to destroy withdrawn", d, last.devices)
			}
			g.r.GPUs = g.mgr
			res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
				t.Errorf("the next agent's pass: %s %s %s, want Ready", got.Phase, got.Reason, got.Message)
			}
		})
	}
}

// TestStopKeepsOtherGPUsPublished: GPU 0's change stopped part way earlier
// (NVML refused its second destroy: another client holds the device) and
// waits for its retry; the agent is stopped part way through GPU 1's
// change. Only GPU 1's device still to destroy is left out of the last
// publication: GPU 0, whose NVML work this pass did not touch, stays
// published as it is.
func TestStopKeepsOtherGPUsPublished(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0,3g.40gb@4")
	if _, err := g.sim.OpenClient(g.migUUID(t, 0, "3g.40gb@4")); err != nil {
		t.Fatal(err)
	}
	whole0, whole1 := spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{whole0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked {
		t.Fatalf("premise: GPU 0 %s %s, want Blocked on the device another client holds", got.Phase, got.Reason)
	}
	ctx, stop := context.WithCancel(t.Context())
	g.r.GPUs = &stopAfterDestroys{Manager: g.mgr, stop: stop, n: 1}
	_, _ = g.r.SyncDeferring(ctx, []v1alpha1.GPUSpec{whole0, whole1}, map[int]GPUResult{0: res.Results[0]}, nil)
	last := g.inv.last()
	if !slices.Contains(last.devices, "gpu-0-mig-3g40gb-9-4") {
		t.Errorf("last publication %v: GPU 0's device left out, want it published (its NVML work did not begin this pass)", last.devices)
	}
	if slices.Contains(last.devices, "gpu-1-mig-3g40gb-9-4") {
		t.Errorf("last publication %v: GPU 1's device still to destroy published", last.devices)
	}
}
