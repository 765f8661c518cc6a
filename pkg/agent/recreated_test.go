package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// refreshingPrepared is a Prepared that is a RecreatedRefresher: it counts
// the refreshes and fails them while fail is set.
type refreshingPrepared struct {
	fakePrepared
	refreshes int
	fail      bool
}

func (f *refreshingPrepared) RefreshRecreated(context.Context) map[types.UID]error {
	f.refreshes++
	if f.fail {
		return map[types.UID]error{"uid-1": errors.New("GPU 0 is being reconfigured")}
	}
	return nil
}

// TestPassRefreshesRecreatedPreparations: the kubelet plugin is asked to
// bring up to date the preparations of devices made again (a GPU reset
// destroyed a running pod's device, a pass made it again) in a new agent's
// first pass and in every pass since NVML work began on a GPU, until a
// refresh succeeds: also where that pass's republication failed, or where
// the GPU's change failed after making devices. A pass with nothing to do
// after a refresh that succeeded does not ask.
func TestPassRefreshesRecreatedPreparations(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	prep := &refreshingPrepared{fakePrepared: g.prep}
	g.r.Prepared = prep
	halves, whole := "3g.40gb@0,3g.40gb@4", "7g.80gb@0"
	pass := func(layout string) {
		t.Helper()
		_, _ = g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, layout)}, nil) // some steps make the publication fail: judged by what the pass leaves
	}
	for _, step := range []struct {
		what          string
		layout        string
		fail          bool
		failRepublish bool
		restart       bool
		wantRefreshes int
	}{
		{what: "a new agent's first pass, nothing to change", layout: "", wantRefreshes: 1},
		{what: "a pass with nothing to change", layout: "", wantRefreshes: 1},
		{what: "a pass that makes the layout", layout: halves, wantRefreshes: 2},
		{what: "a pass with nothing to change after it", layout: halves, wantRefreshes: 2},
		{what: "a pass that changes the layout, its refresh failing", layout: whole, fail: true, wantRefreshes: 3},
		{what: "a pass with nothing to change after a failed refresh", layout: whole, wantRefreshes: 4},
		{what: "a pass with nothing to change after a refresh that succeeded", layout: whole, wantRefreshes: 4},
		{what: "a pass that changes the layout, its republication failing", layout: halves, failRepublish: true, wantRefreshes: 4},
		{what: "the pass after the failed republication", layout: halves, wantRefreshes: 5},
		{what: "a restarted agent's first pass", layout: halves, restart: true, wantRefreshes: 6},
	} {
		if step.restart {
			g.r = &Repartitioner{GPUs: g.r.GPUs, Inventory: g.r.Inventory, Allocations: g.r.Allocations, Prepared: g.r.Prepared,
				Locks: g.r.Locks, Journal: g.r.Journal, SettlePeriod: g.r.SettlePeriod, Sleep: g.r.Sleep}
		}
		prep.fail = step.fail
		g.inv.failRepublish = nil
		if step.failRepublish {
			g.inv.failRepublish = errors.New("the API server timed out")
		}
		if step.layout == "" {
			if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			pass(step.layout)
		}
		if prep.refreshes != step.wantRefreshes {
			t.Errorf("after %s: %d refreshes, want %d", step.what, prep.refreshes, step.wantRefreshes)
		}
	}
}

// TestPassRefreshesAfterAFailedCreate: a change that made one device and
// failed on the next still asks for the refresh (the device made may be
// a prepared one made again).
func TestPassRefreshesAfterAFailedCreate(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	prep := &refreshingPrepared{fakePrepared: g.prep}
	g.r.Prepared = prep
	if _, err := g.r.Sync(t.Context(), nil, nil); err != nil { // the first pass's refresh
		t.Fatal(err)
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase == v1alpha1.PhaseReady {
		t.Fatalf("GPU 0 %+v, want its change failed", r)
	}
	if prep.refreshes != 2 {
		t.Errorf("%d refreshes after a change that made a device and failed, want 2", prep.refreshes)
	}
}
