package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

func spec(idx int32, layout string) v1alpha1.GPUSpec {
	return v1alpha1.GPUSpec{Index: idx, MIGEnabled: true, Layout: layout}
}

func TestSyncEnablesMIGAndCreatesLayout(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	var phases []v1alpha1.GPUPhase
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@4,2g.20gb@0,1g.10gb@2,1g.10gb@3")},
		func(_ int, r GPUResult) error { phases = append(phases, r.Phase); return nil })
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4", "-")
	if got := res.Results[0].Phase; got != v1alpha1.PhaseReady {
		t.Errorf("phase = %s (%s), want Ready", got, res.Results[0].Message)
	}
	if diff := cmp.Diff([]v1alpha1.GPUPhase{v1alpha1.PhaseDraining, v1alpha1.PhaseRepartitioning}, phases); diff != "" {
		t.Errorf("reported phases (-want +got):\n%s", diff)
	}
	// The whole GPU was drained before MIG mode changed, then the pool
	// republished from NVML with nothing tainted.
	if diff := cmp.Diff([]string{"gpu-0"}, g.inv.pubs[0].draining); diff != "" {
		t.Errorf("drained (-want +got):\n%s", diff)
	}
	want := []string{"gpu-0-mig-2g20gb-14-0", "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3", "gpu-0-mig-3g40gb-9-4", "gpu-1"}
	if diff := cmp.Diff(publication{devices: want}, g.inv.last(), cmp.AllowUnexported(publication{})); diff != "" {
		t.Errorf("final publication (-want +got):\n%s", diff)
	}
	if len(g.r.Journal.Entries()) != 0 {
		t.Errorf("journal not cleared: %+v", g.r.Journal.Entries())
	}
}

func TestSyncKeepsAllocatedDevice(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-0")
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
	if res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Errorf("phase = %+v", res.Results[0])
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-3g40gb-9-4"}, g.inv.pubs[0].draining); diff != "" {
		t.Errorf("drained (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("3g.40gb@0", res.InUse[0].String()); diff != "" {
		t.Errorf("in use (-want +got):\n%s", diff)
	}
}

func TestSyncRefusesToDestroyWhenDrainTaintsAreDropped(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "")
	g.inv.dropTaints = true
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// GPU 0 would destroy devices: untouched and Failed; GPU 1 only gains devices.
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4")
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonDeviceTaintsUnsupported || !strings.Contains(r.Message, "DRADeviceTaints") {
		t.Errorf("GPU 0 result = %+v, want Failed/DeviceTaintsUnsupported naming the feature gate", r)
	}
	if r := res.Results[1]; r.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1 result = %+v, want Ready", r)
	}
	if !res.Retry {
		t.Error("Retry = false; the agent should try again later")
	}
	if last := g.inv.last(); len(last.draining) != 0 {
		t.Errorf("last publication still drains %v", last.draining)
	}
	if entries := g.r.Journal.Entries(); len(entries) != 0 {
		t.Errorf("journal left %+v", entries)
	}
}

// TestSyncBlocksWithoutTouchingHardware: a device to be destroyed that is
// allocated, prepared or running a process, whenever it is seen (planning,
// the drain's re-check, under the GPU's lock), blocks the GPU: no NVML
// step, no taint left, Retry, and the GPU's journal entry ended.
func TestSyncBlocksWithoutTouchingHardware(t *testing.T) {
	tests := map[string]struct {
		prepare    func(t *testing.T, g *rig)
		wantPhase  v1alpha1.GPUPhase
		wantReason string
		wantMsg    string
	}{
		"allocated device would be destroyed": {
			prepare:   func(_ *testing.T, g *rig) { g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-4") },
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "gpu-0-mig-3g40gb-9-4",
		},
		"allocated while draining": {
			prepare:   func(_ *testing.T, g *rig) { g.alloc.live = sets.New("gpu-0-mig-3g40gb-9-4") },
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "allocated while draining",
		},
		"prepared device": {
			prepare:   func(_ *testing.T, g *rig) { g.prep.names.Insert("gpu-0-mig-3g40gb-9-4") },
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "gpu-0-mig-3g40gb-9-4",
		},
		"prepared between the re-check and the lock": {
			prepare: func(_ *testing.T, g *rig) {
				g.locks.onBegin = func() { g.prep.names.Insert("gpu-0-mig-3g40gb-9-4") }
			},
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "prepared while draining",
		},
		"allocated between the re-check and the lock": {
			// A claim that tolerates the drain taint, allocated while
			// earlier GPUs were repartitioned: the cache shows it.
			prepare: func(_ *testing.T, g *rig) {
				g.alloc.live = sets.New[string]()
				g.locks.onBegin = func() { g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-4") }
			},
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "allocated while draining",
		},
		"process running": {
			prepare: func(t *testing.T, g *rig) {
				if _, err := g.sim.StartProcess(g.migUUID(t, 0, "3g.40gb@4"), 1000); err != nil {
					t.Fatal(err)
				}
			},
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse, wantMsg: "gpu-0-mig-3g40gb-9-4",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			tc.prepare(t, g)
			before := g.sim.Snapshot()
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Results[0]
			if got.Phase != tc.wantPhase || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("result = %+v, want %s/%s with %q", got, tc.wantPhase, tc.wantReason, tc.wantMsg)
			}
			if !res.Retry {
				t.Error("Retry = false for a blocked GPU")
			}
			if diff := cmp.Diff(before.GPUs, g.sim.Snapshot().GPUs); diff != "" {
				t.Errorf("hardware changed (-before +after):\n%s", diff)
			}
			if last := g.inv.last(); len(last.draining) != 0 {
				t.Errorf("taints left published: %v", last.draining)
			}
			// No NVML step of the pass is in flight: the GPU's work
			// ends (its Draining entry with it).
			if entries := g.r.Journal.Entries(); len(entries) != 0 {
				t.Errorf("journal left %+v", entries)
			}
		})
	}
}

// An allocation the cache shows during the settle period but the live
// re-check does not (one awaiting a binding confirmation the gate will
// refuse, or a release the cache has not seen) does not block the GPU
// when its lock is taken: the live re-check vetted it.
func TestSyncTrustsTheLiveRecheckOverTheCache(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.live = sets.New[string]()
	g.r.Sleep = func(context.Context, time.Duration) error {
		g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-4")
		return nil
	}
	g.syncReady(t, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")})
	g.wantLayouts(t, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
}

func TestSyncRefusesInvalidInput(t *testing.T) {
	tests := map[string]struct {
		spec    v1alpha1.GPUSpec
		reason  string
		message string
	}{
		"overlap":         {spec: spec(0, "3g.40gb@0,4g.40gb@0"), reason: v1alpha1.ReasonInvalidLayout, message: "4g.40gb@0 overlaps 3g.40gb@0 on memory slices 0-3"},
		"bad placement":   {spec: spec(0, "1g.10gb@7"), reason: v1alpha1.ReasonInvalidLayout, message: "start 7 is not a valid placement"},
		"unknown profile": {spec: spec(0, "3g.20gb@0"), reason: v1alpha1.ReasonInvalidLayout, message: `unknown profile "3g.20gb"`},
		"syntax":          {spec: spec(0, "3g.40gb"), reason: v1alpha1.ReasonInvalidLayout, message: "missing"},
		"no such GPU":     {spec: spec(3, "7g.80gb@0"), reason: v1alpha1.ReasonGPUMissing, message: "no GPU with index 3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			before := g.sim.Snapshot()
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{tc.spec}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Results[int(tc.spec.Index)]
			if got.Phase != v1alpha1.PhaseFailed || got.Reason != tc.reason || !strings.Contains(got.Message, tc.message) {
				t.Errorf("result = %+v, want Failed/%s with %q", got, tc.reason, tc.message)
			}
			if diff := cmp.Diff(before.GPUs, g.sim.Snapshot().GPUs); diff != "" {
				t.Errorf("hardware changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestSyncRollsBackOrphanGI plays an agent killed between creating a GPU
// instance and its compute instance: the GI is left alone on the GPU.
func TestSyncRollsBackOrphanGI(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	g.orphan3g(t, 0, 4)
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, Step: StepCreating, Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@0", "3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Errorf("phase = %+v", res.Results[0])
	}
	snap := g.sim.Snapshot()
	for _, gi := range snap.GPUs[0].GPUInstances {
		if len(gi.ComputeInstances) != 1 {
			t.Errorf("GI %d has %d compute instances, want 1 (leaked GI)", gi.ID, len(gi.ComputeInstances))
		}
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
	if len(g.r.Journal.Entries()) != 0 {
		t.Errorf("journal not cleared: %+v", g.r.Journal.Entries())
	}
}

// TestSyncOrphanRollbackOutcomes: the rollback of a GPU instance without
// compute instance on a GPU of the spec reports its outcome as a change
// would: NVML's IN_USE is Blocked/DeviceInUse (retried), any other error an
// NVML error, and a GI destroyed by someone else once observed (NOT_FOUND)
// is rolled back, not a failure.
func TestSyncOrphanRollbackOutcomes(t *testing.T) {
	for name, tc := range map[string]struct {
		fault      nvml.Return // SUCCESS: the GI vanishes as the agent takes the lock
		wantPhase  v1alpha1.GPUPhase
		wantReason string
	}{
		"in use":       {nvml.ERROR_IN_USE, v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse},
		"nvml error":   {nvml.ERROR_UNKNOWN, v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError},
		"already gone": {nvml.SUCCESS, v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0")
			g.orphan3g(t, 0, 4)
			if tc.fault != nvml.SUCCESS {
				if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: tc.fault}); err != nil {
					t.Fatal(err)
				}
			} else {
				g.locks.onBegin = func() {
					g.locks.onBegin = nil
					destroyed := 0
					for _, gi := range g.gis3g(t, 0) {
						if len(mustCIs(t, gi)) == 0 {
							if ret := gi.Destroy(); ret != nvml.SUCCESS {
								t.Fatal(ret)
							}
							destroyed++
						}
					}
					if destroyed != 1 {
						t.Fatalf("destroying the orphan behind the agent's back: %d destroyed", destroyed)
					}
				}
			}
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r := res.Results[0]; r.Phase != tc.wantPhase || r.Reason != tc.wantReason {
				t.Errorf("result %s/%s (%s), want %s/%s", r.Phase, r.Reason, r.Message, tc.wantPhase, tc.wantReason)
			}
			if want := tc.wantPhase != v1alpha1.PhaseReady; res.Retry != want {
				t.Errorf("retry %v, want %v", res.Retry, want)
			}
		})
	}
}

// TestSyncLeavesUnmanagedGIs: a GPU instance without a full-size compute
// instance on a GPU the spec does not list (an administrator's, perhaps with
// smaller compute instances) is not rolled back, unless the journal records
// the agent creating it there (a crash between the GI and its CI, after
// which the spec changed).
func TestSyncLeavesUnmanagedGIs(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "")
	g.setup(t, 1, "")
	g.orphan3g(t, 0, 4)
	g.orphan3g(t, 1, 4)
	uuid1 := g.sim.Snapshot().GPUs[1].UUID
	if err := g.r.Journal.Record(JournalEntry{GPU: 1, UUID: uuid1, Step: StepCreating, Desired: "3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	snap := g.sim.Snapshot()
	if n := len(snap.GPUs[0].GPUInstances); n != 1 {
		t.Errorf("GPU 0 (not managed, not in the journal) has %d GPU instances, want its 1 kept", n)
	}
	if n := len(snap.GPUs[1].GPUInstances); n != 0 {
		t.Errorf("GPU 1 (the journal records creating it) has %d GPU instances, want the orphan rolled back", n)
	}
}

// TestSyncKeepsJournalOfFailedRollback: a journal-recorded orphan on a GPU the
// spec no longer lists whose rollback fails keeps its journal entry, so the
// next pass still rolls it back; the failure is the GPU's result (Failed)
// and the pass asks for a retry.
func TestSyncKeepsJournalOfFailedRollback(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	g.orphan3g(t, 0, 4)
	uuid := g.sim.Snapshot().GPUs[0].UUID
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: uuid, Step: StepCreating, Desired: "3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.r.Journal.Entries()); n != 1 {
		t.Fatalf("journal has %d entries after the failed rollback, want 1", n)
	}
	// No spec lists the GPU, yet the failed rollback is shown (the leaked
	// GI holds memory slices) and retried, not only logged.
	if got, ok := res.Results[0]; !ok || got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError || !res.Retry {
		t.Errorf("after the failed rollback: GPU 0 result %+v (reported %t), retry %t; want Failed/NVMLError, retried", got, ok, res.Retry)
	}
	if res, err = g.r.Sync(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := res.Results[0]; ok || res.Retry {
		t.Errorf("after the rollback: GPU 0 result %+v, retry %t; want no result, no retry", got, res.Retry)
	}
	if n := len(g.sim.Snapshot().GPUs[0].GPUInstances); n != 0 {
		t.Errorf("%d GPU instances left, want the orphan rolled back on the second pass", n)
	}
	if n := len(g.r.Journal.Entries()); n != 0 {
		t.Errorf("journal has %d entries, want none", n)
	}
}

// TestSyncFinishesHalfDoneDestroyOffSpec: a destroy that removed a compute
// instance but not its GPU instance leaves a GI without CI; when the GPU then
// leaves the spec (its NodeMigLayout deleted), the journal still says the
// agent was destroying it, so it is rolled back rather than left for ever.
func TestSyncFinishesHalfDoneDestroyOffSpec(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Phase != v1alpha1.PhaseFailed {
		t.Fatalf("first pass: %+v, want the GPU failed by the refused destroy", res.Results[0])
	}
	for range 2 {
		if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, gi := range g.sim.Snapshot().GPUs[0].GPUInstances {
		if len(gi.ComputeInstances) == 0 {
			t.Errorf("GI %d at memory slice %d is left without a compute instance", gi.ID, gi.Placement.Start)
		}
	}
	if n := len(g.r.Journal.Entries()); n != 0 {
		t.Errorf("journal has %d entries, want none", n)
	}
}

// TestSyncLeavesGIsTheJournalNeverTouched: on a GPU off the spec, only the
// device a journal entry was working on when it stopped counts as the
// agent's; a bare GI elsewhere in the entry's lists (an administrator's) stays.
func TestSyncLeavesGIsTheJournalNeverTouched(t *testing.T) {
	tests := map[string]struct {
		e    JournalEntry
		want int // GPU instances left
	}{
		"draining: nothing touched yet":         {JournalEntry{Step: StepDraining, Destroy: []string{"3g.40gb@0", "3g.40gb@4"}}, 1},
		"destroying another device":             {JournalEntry{Step: StepDestroying, Destroy: []string{"3g.40gb@0", "3g.40gb@4"}}, 1},
		"creating, after the destroys":          {JournalEntry{Step: StepCreating, Destroy: []string{"3g.40gb@4"}, Create: []string{"1g.10gb@0"}, Done: []string{"3g.40gb@4"}}, 1},
		"creating it, the first create done":    {JournalEntry{Step: StepCreating, Create: []string{"1g.10gb@0", "3g.40gb@4"}, Done: []string{"1g.10gb@0"}}, 0},
		"destroying it, the first destroy done": {JournalEntry{Step: StepDestroying, Destroy: []string{"3g.40gb@0", "3g.40gb@4"}, Done: []string{"3g.40gb@0"}}, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "")
			g.orphan3g(t, 0, 4)
			e := tc.e
			e.GPU, e.UUID, e.Desired = 0, g.sim.Snapshot().GPUs[0].UUID, "7g.80gb@0"
			if err := g.r.Journal.Record(e); err != nil {
				t.Fatal(err)
			}
			if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
				t.Fatal(err)
			}
			if left := len(g.sim.Snapshot().GPUs[0].GPUInstances); left != tc.want {
				t.Errorf("%d GPU instances left, want %d", left, tc.want)
			}
		})
	}
}

// TestSyncNVMLFailureIsReported: a CI creation refused by NVML fails the GPU
// with NVMLError, the GI is rolled back, and the next pass converges.
func TestSyncNVMLFailureIsReported(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError || !res.Retry {
		t.Errorf("first pass = %+v retry=%v, want Failed/NVMLError with retry", got, res.Retry)
	}
	if got := g.layouts(t)[0]; strings.Contains(got, "4g.40gb@0") {
		t.Errorf("GI of the failed CI was not rolled back: %s", got)
	}
	if res, err = g.r.Sync(context.Background(), want, nil); err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("second pass = %+v, %v", res.Results[0], err)
	}
	g.wantLayouts(t, "4g.40gb@0,3g.40gb@4")
}

func TestSyncDisablesMIG(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "7g.80gb@0")
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Errorf("phase = %+v", res.Results[0])
	}
	g.wantLayouts(t, "-")
	if diff := cmp.Diff([]string{"gpu-0"}, g.inv.last().devices); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
}

// TestSyncRetriesAfterLyingCICreate: NVML reports a compute instance created
// but there is none; the pass must not report Ready, and the next pass rolls
// the GI back and converges.
func TestSyncRetriesAfterLyingCICreate(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Phase == v1alpha1.PhaseReady || !res.Retry {
		t.Fatalf("first pass = %+v retry=%v, want not Ready and a retry", res.Results[0], res.Retry)
	}
	if res, err = g.r.Sync(context.Background(), want, nil); err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("second pass = %+v, %v", res.Results[0], err)
	}
	for _, gi := range g.sim.Snapshot().GPUs[0].GPUInstances {
		if len(gi.ComputeInstances) != 1 {
			t.Errorf("GI %d has %d compute instances, want 1", gi.ID, len(gi.ComputeInstances))
		}
	}
}

// TestSyncClearsJournalOfGPUsNoLongerAsked: a GPU whose work was interrupted
// and that the spec no longer lists leaves no journal entry behind.
func TestSyncClearsJournalOfGPUsNoLongerAsked(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	if err := g.r.Journal.Record(JournalEntry{GPU: 1, Step: StepDestroying, Desired: "7g.80gb@0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err != nil {
		t.Fatal(err)
	}
	if e := g.r.Journal.Entries(); len(e) != 0 {
		t.Errorf("journal entries left: %+v", e)
	}
}

// TestSyncOrphanRollbackFails: a GPU instance without compute instance that cannot
// be destroyed keeps the GPU from being reported Ready (its layout is not what is
// published) and the pass is retried; the next pass rolls it back and converges.
func TestSyncOrphanRollbackFails(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	g.orphan3g(t, 0, 4)
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError || !res.Retry {
		t.Errorf("first pass: %+v, retry %t; want Failed/NVMLError and a retry", got, res.Retry)
	}
	res, err = g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("second pass: %+v, want Ready", got)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
}

// TestSyncBlocksMIGEnableUnderProcess: a process on the whole GPU (started
// outside any claim) keeps the agent from enabling MIG: the GPU is Blocked
// with DeviceInUse and its MIG mode is left alone (on an Ampere GPU the
// enable would otherwise wait, pending, for a reset that removes the device
// under the process).
func TestSyncBlocksMIGEnableUnderProcess(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	if _, err := g.sim.StartProcess(g.sim.Snapshot().GPUs[0].UUID, 1000); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !res.Retry {
		t.Errorf("enable with a process on the GPU: %+v, retry %t; want Blocked/DeviceInUse and a retry", got, res.Retry)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
		t.Errorf("MIG mode current %t pending %t, want both off (not touched)", st.MIGCurrent, st.MIGPending)
	}
	if len(g.inv.pubs) != 1 || len(g.inv.pubs[0].draining) != 0 {
		t.Errorf("publications %+v, want one, nothing drained", g.inv.pubs)
	}
}

// TestSyncCancelsRevertedMIGMode: on an Ampere GPU a MIG enable set while a
// process runs stays pending until a reset; while the spec asks for it and
// the process runs the GPU is Blocked with ResetRequired, and when the spec
// goes back to MIG off before the reset, the pending change is cancelled, so
// a later reset does not turn MIG on behind the spec's back.
func TestSyncCancelsRevertedMIGMode(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := context.Background()
	pid := g.pendEnable(t)
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired {
		t.Fatalf("enable pending: %+v, want Blocked/ResetRequired", got)
	}
	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("after the revert: %+v, want Ready", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
		t.Errorf("MIG mode current %t pending %t, want both off", st.MIGCurrent, st.MIGPending)
	}
	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
}

// TestSyncSetsPendingMIGModeAgainOnceIdle: an Ampere GPU's MIG enable set
// while a process ran is pending; once the process is gone the agent sets
// the mode again (nvml.h: "idle the device and retry setting the mode"),
// which activates it without a reset, and goes on to the layout.
func TestSyncSetsPendingMIGModeAgainOnceIdle(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := context.Background()
	pid := g.pendEnable(t)
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired || !strings.Contains(got.Message, "set again once nothing uses") {
		t.Fatalf("enable pending under a process: %+v, want Blocked/ResetRequired saying it is set again once idle", got)
	}
	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("once idle: %+v, want Ready", got)
	}
	st := g.sim.Snapshot().GPUs[0]
	if !st.MIGCurrent || st.MIGPending != st.MIGCurrent || len(st.GPUInstances) != 1 {
		t.Errorf("MIG current %t pending %t, GPU instances %v; want MIG on with 7g.80gb@0", st.MIGCurrent, st.MIGPending, st.GPUInstances)
	}
}

// TestSyncResetRequiredIsBlocked: NVML answering a MIG mode change with
// RESET_REQUIRED leaves the GPU Blocked with ResetRequired (retried), not Failed.
func TestSyncResetRequiredIsBlocked(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "SetMigMode", Nth: 1, Return: nvml.ERROR_RESET_REQUIRED}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired || !res.Retry {
		t.Errorf("result %+v, retry %t; want Blocked/ResetRequired and a retry", got, res.Retry)
	}
}

// TestPlanGPUMIGOffWithoutMIG: a spec asking for MIG off on a GPU without
// MIG, or of no catalogued model, is met already (Ready), not a failure.
func TestPlanGPUMIGOffWithoutMIG(t *testing.T) {
	r := &Repartitioner{}
	for name, g := range map[string]gpu.GPU{
		"no MIG":       {Index: 0, ProductName: "Tesla T4"},
		"uncatalogued": {Index: 0, ProductName: "NVIDIA Future GPU", MIGCapable: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, res := r.planGPU([]GPUState{{GPU: g}}, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false}, sets.New[string]())
			if res == nil || res.Phase != v1alpha1.PhaseReady {
				t.Errorf("MIG off on %s: %+v, want Ready", g.ProductName, res)
			}
			_, res = r.planGPU([]GPUState{{GPU: g}}, v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}, sets.New[string]())
			if res == nil || res.Phase != v1alpha1.PhaseFailed || res.Reason != v1alpha1.ReasonUnknownGPU {
				t.Errorf("MIG on on %s: %+v, want Failed/UnknownGPU", g.ProductName, res)
			}
		})
	}
}

// TestSyncWithALostGPU: GPU 1 of three falls off the bus (every NVML call on
// it gives ERROR_GPU_IS_LOST). The pass goes on for the others: GPU 0 is
// repartitioned, the pool is published without GPU 1's devices, and GPU 1
// (asked for a layout) and GPU 2 (not managed) are reported: GPU 1 failed
// as GPUUnreadable, with what identified it before, and retried; once it is
// back, its layout is applied.
func TestSyncWithALostGPU(t *testing.T) {
	g := newRig(t, "3xA100-SXM4-80GB")
	ctx := context.Background()
	first, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, first, metav1.Now())
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	desired := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")}
	res, err := g.r.Sync(ctx, desired, nil)
	if err != nil {
		t.Fatalf("Sync with GPU 1 lost failed as a whole: %v", err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", r)
	}
	r1 := res.Results[1]
	if r1.Phase != v1alpha1.PhaseFailed || r1.Reason != v1alpha1.ReasonGPUUnreadable || !strings.Contains(r1.Message, "ERROR_GPU_IS_LOST") || !res.Retry {
		t.Errorf("GPU 1: %+v (retry %v), want Failed GPUUnreadable naming NVML's code, retried", r1, res.Retry)
	}
	want := []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-2"}
	if diff := cmp.Diff(want, g.inv.last().devices); diff != "" {
		t.Errorf("published devices (-want +got):\n%s", diff)
	}
	st := BuildStatus(before, 2, res, metav1.Now())
	var row *v1alpha1.GPUStatus
	for i := range st.GPUs {
		if st.GPUs[i].Index == 1 {
			row = &st.GPUs[i]
		}
	}
	if row == nil || row.Reason != v1alpha1.ReasonGPUUnreadable || row.UUID == "" || row.UUID != before.GPUs[1].UUID || row.Layout != "" {
		t.Errorf("status row of GPU 1: %+v, want GPUUnreadable with its UUID %s and no layout", row, before.GPUs[1].UUID)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Errorf("conditions %+v, want Degraded", st.Conditions)
	}
	// A lost GPU not in the spec is reported too.
	res, err = g.r.Sync(ctx, desired[:1], nil)
	if err != nil || res.Results[1].Reason != v1alpha1.ReasonGPUUnreadable {
		t.Errorf("unmanaged lost GPU: %v, %+v", err, res.Results[1])
	}

	if err := g.sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	res, err = g.r.Sync(ctx, desired, nil)
	if err != nil || res.Results[1].Phase != v1alpha1.PhaseReady {
		t.Fatalf("after recovery: %v, %+v", err, res.Results[1])
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4", "-")
}

// mustCIs lists the full-size compute instances of a GPU instance.
func mustCIs(t *testing.T, gi nvml.GpuInstance) []nvml.ComputeInstance {
	t.Helper()
	info, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	cis, ret := gi.GetComputeInstances(&info)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return cis
}

// TestSyncTransientNVMLErrorWithdrawsNothing: an error that may pass
// (ERROR_UNKNOWN) while listing a sound GPU's instances fails the pass as a
// whole: the GPU is not reported unreadable and no publication leaves its
// devices out (one of them allocated); the next pass goes through.
func TestSyncTransientNVMLErrorWithdrawsNothing(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-0")
	g.alloc.live = g.alloc.cached
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.GetComputeInstances", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	desired := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	if _, err := g.r.Sync(context.Background(), desired, nil); err == nil || !strings.Contains(err.Error(), "ERROR_UNKNOWN") {
		t.Fatalf("Sync with a passing NVML error = %v, want the pass failed with it", err)
	}
	for i, p := range g.inv.pubs {
		if len(p.devices) != 2 {
			t.Errorf("publication %d has devices %v: a device was withdrawn", i, p.devices)
		}
	}
	res, err := g.r.Sync(context.Background(), desired, nil)
	if err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("the next pass: %v, %+v", err, res.Results[0])
	}
	if got := g.inv.last().devices; len(got) != 2 {
		t.Errorf("published %v, want both halves", got)
	}
}

// newUncataloguedRig is a rig over A100s whose driver also offers a
// 1g.10gb-me profile (GI profile ID 21, at starts 5 and 6) that the
// agent's catalog lacks, and hm a manager with the driver's profile table
// (to make such devices as nvidia-smi would).
func newUncataloguedRig(t *testing.T, spec string) (*rig, *gpu.NVMLManager) {
	t.Helper()
	noME := mig.Profile{Name: "1g.10gb-me", ID: 21, NVMLProfile: nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, ComputeSlices: 1, MemorySlices: 1,
		MemoryMiB: 9856, MaxCount: 7, Multiprocessors: 14, CopyEngines: 1, Placements: []mig.Placement{{Start: 5, Size: 1}, {Start: 6, Size: 1}}}
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", noME)
	if err != nil {
		t.Fatal(err)
	}
	g := newRigWith(t, nvmlsim.Config{Spec: spec, Catalog: hardware})
	hm, err := gpu.NewNVML(g.sim, hardware)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hm.Shutdown() })
	return g, hm
}

// TestSyncUncataloguedProfileGI: a GPU instance of a profile the agent's
// catalog lacks (made with nvidia-smi from a newer driver's profile table)
// on a GPU the spec manages is seen: it is in the status layout, drained
// and destroyed like any device the layout lacks, and left (Blocked) while
// a process runs on it.
func TestSyncUncataloguedProfileGI(t *testing.T) {
	g, hm := newUncataloguedRig(t, "2xA100-SXM4-80GB")
	ctx := t.Context()
	for idx := range 2 {
		g.setup(t, idx, "4g.40gb@0")
		if _, err := hm.CreateMIGDevice(ctx, idx, mig.Device{Profile: "1g.10gb-me", Start: 6}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"4g.40gb@0,1g.10gb-me@6", "4g.40gb@0,1g.10gb-me@6"}, g.layouts(t)); diff != "" {
		t.Fatalf("layouts seen (-want +got):\n%s", diff)
	}
	busy := g.migUUID(t, 1, "1g.10gb-me@6")
	if _, err := g.sim.StartProcess(busy, 100); err != nil {
		t.Fatal(err)
	}

	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4"), spec(1, "4g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "4g.40gb@0,3g.40gb@4", "4g.40gb@0,1g.10gb-me@6")
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", r)
	}
	if r := res.Results[1]; r.Phase != v1alpha1.PhaseBlocked || r.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(r.Message, "gpu-1-mig-1g10gb-me-21-6") {
		t.Errorf("GPU 1: %+v, want Blocked by its busy 1g.10gb-me", r)
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-1g10gb-me-21-6"}, g.inv.pubs[0].draining); diff != "" {
		t.Errorf("drained (-want +got):\n%s", diff)
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if got := st.GPUs[1].Layout; got != "4g.40gb@0,1g.10gb-me@6" {
		t.Errorf("GPU 1 status layout = %q", got)
	}
	if got := st.GPUs[1].CatalogMismatches; len(got) != 1 || !strings.Contains(got[0], "1g.10gb-me") {
		t.Errorf("GPU 1 catalog mismatches = %q", got)
	}

	// A spec may keep it where it stands (an Auto change cancelled while it
	// is in use), never create one.
	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,1g.10gb-me@6"), spec(1, "4g.40gb@0,1g.10gb-me@6")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[1]; r.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1 asked to keep its 1g.10gb-me: %+v, want Ready", r)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, "never creates") {
		t.Errorf("GPU 0 asked to create a 1g.10gb-me: %+v, want Failed/InvalidLayout", r)
	}
	if diff := cmp.Diff([]string{"4g.40gb@0,3g.40gb@4", "4g.40gb@0,1g.10gb-me@6"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts after (-want +got):\n%s", diff)
	}
}

// TestSyncRefusesLayoutOverKeptUncataloguedGI: a spec that keeps a GPU
// instance of a profile the catalog lacks and creates a device over its
// memory slices (NVML's placement of it) is an impossible layout: refused
// as InvalidLayout, the hardware untouched.
func TestSyncRefusesLayoutOverKeptUncataloguedGI(t *testing.T) {
	g, hm := newUncataloguedRig(t, "1xA100-SXM4-80GB")
	ctx := t.Context()
	g.setup(t, 0, "4g.40gb@0,1g.10gb@4")
	if _, err := hm.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb-me", Start: 6}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4,1g.10gb-me@6")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Errorf("3g.40gb@4 over the kept 1g.10gb-me@6: %+v, want Failed/InvalidLayout", r)
	}
	if diff := cmp.Diff([]string{"4g.40gb@0,1g.10gb@4,1g.10gb-me@6"}, g.layouts(t)); diff != "" {
		t.Errorf("hardware touched for an impossible layout (-want +got):\n%s", diff)
	}
}

// TestSyncRefusesWhatNVMLDoesNotOffer: where the GPU's NVML offers a
// profile at other placements than the catalog, under another GI profile
// ID, or not at all, a layout that creates it where NVML would refuse is
// InvalidLayout before any device is destroyed (the catalog's placements
// and IDs are partly unverified; NVML decides).
func TestSyncRefusesWhatNVMLDoesNotOffer(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	three, _ := a100.Profile("3g.40gb")
	rightOnly := *three
	rightOnly.Placements = []mig.Placement{{Start: 4, Size: 4}}
	two, _ := a100.Profile("2g.20gb")
	otherID := *two
	otherID.ID = 30
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", rightOnly, otherID)
	if err != nil {
		t.Fatal(err)
	}
	// ... nor 1g.20gb at all.
	hw, err := hardware.Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if hw, err = hw.WithNVMLPlacements(map[string][]mig.Placement{"1g.20gb": {}}, nil); err != nil {
		t.Fatal(err)
	}
	if hardware, err = hardware.With(hw); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ layout, want string }{
		"a profile NVML does not offer":        {"1g.20gb@0,1g.10gb@2", "NVML does not offer 1g.20gb"},
		"a placement NVML does not offer":      {"3g.40gb@0,3g.40gb@4", "NVML offers 3g.40gb at 4+4 only"},
		"a GI profile ID NVML gives otherwise": {"2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4", "NVML gives 2g.20gb GI profile ID 30"},
		"the placement NVML offers":            {"4g.40gb@0,3g.40gb@4", ""},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
			g.setup(t, 0, "1g.10gb@0,1g.10gb@1")
			res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, tc.layout)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := res.Results[0]
			if tc.want == "" {
				if r.Phase != v1alpha1.PhaseReady {
					t.Errorf("result %+v, want Ready", r)
				}
				return
			}
			if r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, tc.want) {
				t.Errorf("result %+v, want Failed/InvalidLayout saying %q", r, tc.want)
			}
			if diff := cmp.Diff([]string{"1g.10gb@0,1g.10gb@1"}, g.layouts(t)); diff != "" {
				t.Errorf("hardware touched (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncRetriesAfterLyingDestroy: NVML reports a GPU instance destroyed
// but it is still there; the pass finds the GPU differing from its desired
// layout, says so (Pending, not Ready) and asks for a retry, which
// converges.
func TestSyncRetriesAfterLyingDestroy(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhasePending || !res.Retry || !strings.Contains(r.Message, "differs from the desired layout") {
		t.Fatalf("first pass = %+v retry=%v, want Pending (differs from the desired layout) and a retry", r, res.Retry)
	}
	if res, err = g.r.Sync(context.Background(), want, nil); err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("second pass = %+v, %v", res.Results[0], err)
	}
	if got := g.layouts(t)[0]; got != "3g.40gb@0" {
		t.Errorf("layout %q, want 3g.40gb@0", got)
	}
}

// TestSyncMIGModeThatTakesAReboot: where the driver cannot reset the GPU
// itself (a GPU passed through to a virtual machine: nvmlDeviceSetMigMode's
// activation status is ERROR_RESET_REQUIRED, nvml.h), an Ampere MIG mode
// change stays pending with nothing on the GPU; the GPU is
// Blocked/ResetRequired with a message that asks for a reboot (not one
// blaming a process). The passes before the reboot neither drain the GPU's
// devices again (a drain, a withdrawal and a republication of the node's
// slices each) nor set the mode again: nothing but the reboot applies it.
// Once rebooted the agent goes on to the layout, MIG on, then off.
func TestSyncMIGModeThatTakesAReboot(t *testing.T) {
	g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", NoGPUReset: true})
	ctx := context.Background()
	waitsForReboot := func(t *testing.T, want v1alpha1.GPUSpec) {
		t.Helper()
		res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{want}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Results[0]
		if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired || !strings.Contains(got.Message, "reboot") || strings.Contains(got.Message, "process") {
			t.Fatalf("first pass: %+v, want Blocked/ResetRequired asking for a reboot", got)
		}
		// A SetMigMode would fail now, and the GPU with it.
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "SetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
		before, first := len(g.inv.pubs), got.Message
		for range 2 {
			res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{want}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonResetRequired || got.Message != first {
				t.Fatalf("pass before the reboot: %+v, want Blocked/ResetRequired saying %q as the first pass did", got, first)
			}
		}
		for _, p := range g.inv.pubs[before:] {
			if len(p.draining) > 0 {
				t.Errorf("a pass before the reboot drained %v again", p.draining)
			}
		}
		if err := g.sim.ClearFaults(); err != nil {
			t.Fatal(err)
		}
		if err := g.sim.ResetGPU(0); err != nil { // the reboot
			t.Fatal(err)
		}
		res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{want}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
			t.Errorf("after the reboot: %+v, want Ready", got)
		}
	}
	t.Run("enable", func(t *testing.T) { waitsForReboot(t, spec(0, "7g.80gb@0")) })
	if got := g.layouts(t)[0]; got != "7g.80gb@0" {
		t.Fatalf("layout %q after the reboot, want 7g.80gb@0", got)
	}
	t.Run("disable", func(t *testing.T) { waitsForReboot(t, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false}) })
	if got := g.layouts(t)[0]; got != "-" {
		t.Errorf("layout %q after the reboot, want MIG off", got)
	}
}

// TestUnreadableMessage: a GPU NVML does not let the agent read
// (ERROR_NO_PERMISSION) says to look at the agent's deployment; a GPU
// fallen off the bus does not.
func TestUnreadableMessage(t *testing.T) {
	tests := map[string]struct {
		ret      nvml.Return
		wantHint bool
	}{
		"no permission": {nvml.ERROR_NO_PERMISSION, true},
		"lost":          {nvml.ERROR_GPU_IS_LOST, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := fmt.Errorf("reading GPU 0: %w", &gpu.NVMLError{Op: "nvmlDeviceGetGpuInstances", Return: tc.ret})
			msg := unreadableMessage(err)
			if !strings.Contains(msg, err.Error()) {
				t.Errorf("message %q does not carry the error %q", msg, err)
			}
			if got := strings.Contains(msg, "the chart runs the agent privileged"); got != tc.wantHint {
				t.Errorf("message %q: deployment hint %t, want %t", msg, got, tc.wantHint)
			}
		})
	}
}
