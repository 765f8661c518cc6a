package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestResumesHalfDoneChangeWhoseSpecIsGone: the agent is killed after a
// disable destroyed the GPU's devices, before it turned MIG mode off, and
// the GPU's spec is gone when it starts again: the GPU, in MIG mode without
// a device, would publish nothing for good. The pass finishes the change
// (MIG mode off, the GPU published whole) and says so in its result.
func TestResumesHalfDoneChangeWhoseSpecIsGone(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	cm := &killingManager{Manager: g.mgr, at: 2, after: true} // both destroys done, then killed
	g.r.GPUs = cm
	if died, err := syncUntilKilled(g.r, []v1alpha1.GPUSpec{{Index: 0}}); !died {
		t.Fatalf("not killed: %v %v", err, cm.ops)
	}
	g.restart(t)
	// The NodeMigLayout is gone: the live read finds no spec.
	g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) { return nil, nil }
	res, err := g.r.Sync(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseReady || !strings.HasPrefix(got.Message, resumedNote) {
		t.Errorf("result %+v, want Ready with a message that begins %q", got, resumedNote)
	}
	if diff := cmp.Diff([]string{"-"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}
	if e := g.r.Journal.Entries(); len(e) != 0 {
		t.Errorf("journal left: %+v", e)
	}
	// Nothing more to finish: the next pass leaves the GPU alone.
	if res, err = g.r.Sync(context.Background(), nil, nil); err != nil || len(res.Results) != 0 {
		t.Errorf("next pass results %+v, %v; want none", res.Results, err)
	}
}

// failingCreates is a GPU manager whose creates all fail with an NVML error.
type failingCreates struct {
	gpu.Manager
	creates int
}

func (f *failingCreates) CreateMIGDevice(_ context.Context, _ int, d mig.Device) (gpu.MIGDevice, error) {
	f.creates++
	return gpu.MIGDevice{}, fmt.Errorf("creating %s: %w", d, gpu.ErrNVML)
}

// TestResumesOnce: a layout whose creates fail leaves the GPU emptied;
// its MigLayout is then deleted (the administrator gives up on it). The
// change, which no spec asks for, is tried once more, then left: no pass
// after that tries it or asks for a retry.
func TestResumesOnce(t *testing.T) {
	ctx := context.Background()
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	f := &failingCreates{Manager: g.mgr}
	g.r.GPUs = f
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("result with the spec %+v, want Failed", got)
	}
	// The NodeMigLayout is deleted.
	g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) { return nil, nil }
	f.creates = 0
	if res, err = g.r.Sync(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; f.creates != 1 || got.Phase != v1alpha1.PhaseFailed || !strings.HasPrefix(got.Message, resumedNote) {
		t.Errorf("first pass without the spec: %d creates, result %+v; want one try, Failed, told as resumed", f.creates, got)
	}
	for range 2 {
		if res, err = g.r.Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 0 || res.Retry {
			t.Errorf("later pass: results %+v, retry %t; want none", res.Results, res.Retry)
		}
	}
	if f.creates != 1 {
		t.Errorf("%d creates of the layout no spec asks for, want 1", f.creates)
	}
	if e := g.r.Journal.Entries(); len(e) != 0 {
		t.Errorf("journal left: %+v", e)
	}
}

// TestResumedChangeGivesWayToNewSpec: a spec that lists the GPU again by
// the time its NVML work starts (read live) takes over from the journal's:
// the resumed change is not applied in that pass.
func TestResumedChangeGivesWayToNewSpec(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	cm := &killingManager{Manager: g.mgr, at: 2, after: true} // both destroys of a disable done, then killed
	g.r.GPUs = cm
	if died, err := syncUntilKilled(g.r, []v1alpha1.GPUSpec{{Index: 0}}); !died {
		t.Fatalf("not killed: %v %v", err, cm.ops)
	}
	g.restart(t)
	g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) {
		return []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil
	}
	if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{""}, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got): the journal's change (MIG mode off) applied over the new spec\n%s", diff)
	}
}
