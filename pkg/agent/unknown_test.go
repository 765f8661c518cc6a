package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// An allocation of the node's driver and pool that names no device of the
// node under the agent's names (a DRA driver of the same name that published
// the pool before, say) may hold any device of the GPU it points to: the
// agent destroys nothing there and reports the GPU's devices in use.
func TestSyncKeepsGPUsUnknownAllocationsMayHold(t *testing.T) {
	const before, after = "3g.40gb@0,3g.40gb@4", "7g.80gb@0"
	type want struct {
		phases  []v1alpha1.GPUPhase
		reasons []string
		layouts []string
		inUse   []string
	}
	tests := map[string]struct {
		cached, live []string
		want         want
	}{
		"a name of GPU 0 keeps GPU 0 only": {
			cached: []string{"gpu-0-mig-3g.40gb-0"}, live: []string{"gpu-0-mig-3g.40gb-0"},
			want: want{phases: []v1alpha1.GPUPhase{v1alpha1.PhaseBlocked, v1alpha1.PhaseReady},
				reasons: []string{v1alpha1.ReasonUnknownAllocation, v1alpha1.ReasonLayoutApplied},
				layouts: []string{before, after}, inUse: []string{before, ""}},
		},
		"a name of no GPU keeps every GPU": {
			cached: []string{"mig-3g.40gb-uuid-1234"}, live: []string{"mig-3g.40gb-uuid-1234"},
			want: want{phases: []v1alpha1.GPUPhase{v1alpha1.PhaseBlocked, v1alpha1.PhaseBlocked},
				reasons: []string{v1alpha1.ReasonUnknownAllocation, v1alpha1.ReasonUnknownAllocation},
				layouts: []string{before, before}, inUse: []string{before, before}},
		},
		// NVIDIA's DRA driver names devices by the GPU's minor number:
		// minor 2 may be this node's GPU 1, which the name of a GPU
		// index NVML does not count cannot tell.
		"a name of a GPU index NVML does not count keeps every GPU": {
			cached: []string{"gpu-2-mig-3g40gb-9-4"}, live: []string{"gpu-2-mig-3g40gb-9-4"},
			want: want{phases: []v1alpha1.GPUPhase{v1alpha1.PhaseBlocked, v1alpha1.PhaseBlocked},
				reasons: []string{v1alpha1.ReasonUnknownAllocation, v1alpha1.ReasonUnknownAllocation},
				layouts: []string{before, before}, inUse: []string{before, before}},
		},
		// (The status reports GPU 0 in use until the cache sees the release.)
		"a release the cache has not seen blocks no change": {
			cached: []string{"gpu-0-mig-3g.40gb-0"}, live: []string{},
			want: want{phases: []v1alpha1.GPUPhase{v1alpha1.PhaseReady, v1alpha1.PhaseReady},
				reasons: []string{v1alpha1.ReasonLayoutApplied, v1alpha1.ReasonLayoutApplied},
				layouts: []string{after, after}, inUse: []string{after, ""}},
		},
		"the agent's own names are no unknown allocation": {
			cached: []string{"gpu-0-mig-3g40gb-9-4"}, live: []string{"gpu-0-mig-3g40gb-9-4"},
			want: want{phases: []v1alpha1.GPUPhase{v1alpha1.PhaseBlocked, v1alpha1.PhaseReady},
				reasons: []string{v1alpha1.ReasonDeviceInUse, v1alpha1.ReasonLayoutApplied},
				layouts: []string{before, after}, inUse: []string{"3g.40gb@4", ""}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "2xA100-SXM4-80GB")
			g.setup(t, 0, before)
			g.setup(t, 1, before)
			g.alloc.cached, g.alloc.live = sets.New(tc.cached...), sets.New(tc.live...)
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, after), spec(1, after)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got want
			for i := range 2 {
				got.phases = append(got.phases, res.Results[i].Phase)
				got.reasons = append(got.reasons, res.Results[i].Reason)
				got.inUse = append(got.inUse, res.InUse[i].String())
			}
			got.layouts = g.layouts(t)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// An allocation under a name the agent does not give costs no read of the
// API server on a pass that destroys nothing: the cache's view is enough to
// report the GPU in use.
func TestUnknownAllocationReadLiveOnlyToDestroy(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	names := sets.New("gpu-0-mig-foreign")
	g.alloc.cached, g.alloc.live = names, names
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.alloc.liveReads != 0 || res.Results[0].Phase != v1alpha1.PhaseReady || res.InUse[0].String() != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("%d live reads, GPU %s, in use %q; want none, Ready, every device in use", g.alloc.liveReads, res.Results[0].Phase, res.InUse[0])
	}
}

// A GPU that only gains devices loses none an unknown allocation could hold:
// the change goes ahead. The name is of no device the agent could make
// again (a GI profile ID the GPU does not give 2g.20gb: another version's
// or publisher's name); a device the agent names that the GPU lost is made
// again first (TestRestoreHeldAfterReboot).
func TestSyncCreatesBesideUnknownAllocations(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	names := sets.New("gpu-0-mig-2g20gb-99-4")
	g.alloc.cached, g.alloc.live = names, names
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0].Phase; got != v1alpha1.PhaseReady {
		t.Errorf("phase %s (%s), want Ready", got, res.Results[0].Message)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
}

// TestSyncCreatesBesideUnknownAllocationsWhileAnotherGPUDrains: the same
// while another GPU of the node loses devices in the pass (so it drains and
// the allocations are read again after the settle period): the GPU that
// only gains devices is not held back by the unknown allocation on it.
func TestSyncCreatesBesideUnknownAllocationsWhileAnotherGPUDrains(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0")
	names := sets.New("gpu-1-mig-2g20gb-99-4")
	g.alloc.cached, g.alloc.live = names, names
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for idx := range 2 {
		if got := res.Results[idx]; got.Phase != v1alpha1.PhaseReady {
			t.Errorf("GPU %d %s (%s): %s, want Ready", idx, got.Phase, got.Reason, got.Message)
		}
	}
	g.wantLayouts(t, "7g.80gb@0", "3g.40gb@0,3g.40gb@4")
}

// TestUnknownNamesByIndexAndMinor: an unknown allocated name counts on the
// GPU of the NVML index it gives and on the GPU whose minor number it is
// (NVIDIA's DRA driver names devices by minor: on this node minor 1 is
// GPU 0 and minor 2 GPU 1, a GPU before them hidden from NVML); a number
// that is neither, or no number, counts on every GPU.
func TestUnknownNamesByIndexAndMinor(t *testing.T) {
	r := &Repartitioner{Inventory: &fakeInventory{}, counted: sets.New(0, 1)}
	obs := []GPUState{{GPU: gpu.GPU{Index: 0, Minor: 1}}, {GPU: gpu.GPU{Index: 1, Minor: 2}}}
	for name, want := range map[string]unknownAllocations{
		"gpu-1-mig-9-4-4":      {0: {"gpu-1-mig-9-4-4"}, 1: {"gpu-1-mig-9-4-4"}}, // NVIDIA's MIG name, minor 1
		"gpu-2-mig-3g40gb-9-4": {1: {"gpu-2-mig-3g40gb-9-4"}},                    // minor 2; no GPU 2
		"gpu-0-mig-3g.40gb-0":  {0: {"gpu-0-mig-3g.40gb-0"}},                     // an older name of GPU 0; no minor 0
		"gpu-5":                {anyGPU: {"gpu-5"}},
		"mig-3g.40gb-uuid-12":  {anyGPU: {"mig-3g.40gb-uuid-12"}},
	} {
		if diff := cmp.Diff(want, r.unknownIn(sets.New(name), obs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// foreignAfterLiveRead is the allocations of a node where, just after the
// agent's live read, another publisher of the driver and pool has a claim
// allocated "gpu-0-mig-foreign", which the cache then shows.
type foreignAfterLiveRead struct{ *fakeAllocations }

func (f foreignAfterLiveRead) AllocatedDevices(ctx context.Context, live bool) (sets.Set[string], error) {
	if live && f.cached.Len() == 0 {
		f.cached = sets.New("gpu-0-mig-foreign")
		return sets.New[string](), nil
	}
	if live {
		return f.cached, nil
	}
	return f.fakeAllocations.AllocatedDevices(ctx, live)
}

// TestUnknownAllocationMadeWhileDrainingBlocks: an allocation under a name
// the agent does not publish (another publisher of the driver and pool) is
// outside the drain's taints. One the live read after the settle period
// shows, or a later read (after the withdrawal, before the GPU's lock, the
// cache under it), blocks the GPU as one seen before the drain does; the change went ahead and destroyed every device
// of the GPU, one of which the claim may hold.
func TestUnknownAllocationMadeWhileDrainingBlocks(t *testing.T) {
	for name, allocs := range map[string]func(*fakeAllocations) Allocations{
		"in the settle period": func(f *fakeAllocations) Allocations {
			f.cached, f.live = sets.New[string](), sets.New("gpu-0-mig-foreign")
			return f
		},
		"after the live read": func(f *fakeAllocations) Allocations {
			f.cached = sets.New[string]()
			return foreignAfterLiveRead{f}
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.r.Allocations = allocs(g.alloc)
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonUnknownAllocation {
				t.Errorf("GPU 0 %s/%s, layout now %v; want Blocked/UnknownAllocation and 3g.40gb@0,3g.40gb@4 kept", got.Phase, got.Reason, g.layouts(t))
			}
			if got := g.layouts(t); len(got) != 1 || got[0] != "3g.40gb@0,3g.40gb@4" {
				t.Errorf("layout %v, want 3g.40gb@0,3g.40gb@4 kept", got)
			}
			if entries := g.r.Journal.Entries(); len(entries) != 0 {
				t.Errorf("journal left %+v; the blocked GPU's work ends", entries)
			}
		})
	}
}

// TestPendingMIGModeCancelledUnderUnknownAllocation: as
// TestPendingMIGModeCancelledUnderClaims, the claim allocated under a name
// the agent does not publish (another publisher of the driver and pool):
// it may hold the whole GPU the pending enable takes away at the next
// reset, so the change is cancelled; it stayed pending while the GPU was
// reported Blocked.
func TestPendingMIGModeCancelledUnderUnknownAllocation(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	specs := g.leaveEnablePending(t)
	names := sets.New("gpu-0-foreign")
	g.alloc.cached, g.alloc.live = names, names
	res, err := g.r.Sync(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := g.sim.Snapshot().GPUs[0]
	if got := res.Results[0]; st.MIGPending != st.MIGCurrent || got.Reason != v1alpha1.ReasonUnknownAllocation || !strings.Contains(got.Message, "pending MIG mode change was cancelled") {
		t.Errorf("GPU 0 %s/%s %q, MIG current %t pending %t; want the pending enable cancelled and Blocked/UnknownAllocation saying so",
			got.Phase, got.Reason, got.Message, st.MIGCurrent, st.MIGPending)
	}
}

// TestWholeGPUNameOfAGPUInMIGModeIsUnknown: with GPU 0 in MIG mode the
// agent publishes no device gpu-0; an allocation naming it (another
// publisher's whole GPU, or a claim from before MIG mode) may hold any
// device of the GPU, as any name the agent does not publish may: the GPU
// is not repartitioned.
func TestWholeGPUNameOfAGPUInMIGModeIsUnknown(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	names := sets.New("gpu-0")
	g.alloc.cached, g.alloc.live = names, names
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonUnknownAllocation || g.layouts(t)[0] != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("GPU 0 %s/%s, layout now %v; want Blocked/UnknownAllocation and its devices kept", got.Phase, got.Reason, g.layouts(t))
	}
}
