package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestJournalUnwritableAtDrainNeverTaints: a GPU whose drain cannot be
// journaled is not drained at all (no NVML step, and no taint or
// withdrawal, is taken unjournaled): no publication of the pass taints or
// leaves out its devices, which stay allocatable throughout.
func TestJournalUnwritableAtDrainNeverTaints(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	unwritableJournal(t, g)
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable {
		t.Errorf("GPU 0: %s/%s (%q), want Failed/%s", got.Phase, got.Reason, got.Message, ReasonJournalUnwritable)
	}
	for i, p := range g.inv.pubs {
		if len(p.draining) != 0 {
			t.Errorf("publication %d drains %v; nothing may be drained unjournaled", i, p.draining)
		}
		if len(p.devices) != 1 || p.devices[0] != "gpu-0-mig-7g80gb-0-0" {
			t.Errorf("publication %d holds %v, want the untouched gpu-0-mig-7g80gb-0-0", i, p.devices)
		}
	}
}

// TestJournalEntryOfMissingGPUKept: a GPU a spec asks for that NVML does
// not count now (GPUMissing: not enumerated after a crash and a reboot)
// keeps its journal entry as it was, so that its half-made work is undone
// once it is back.
func TestJournalEntryOfMissingGPUKept(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	entry := JournalEntry{GPU: 1, UUID: "GPU-gone", Step: StepCreating, Desired: "3g.40gb@0", Create: []string{"3g.40gb@0"}}
	if err := g.r.Journal.Record(entry); err != nil {
		t.Fatal(err)
	}
	before := g.r.Journal.Entries()
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(1, "3g.40gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[1]; got.Reason != v1alpha1.ReasonGPUMissing {
		t.Errorf("GPU 1: %s/%s, want Failed/%s", got.Phase, got.Reason, v1alpha1.ReasonGPUMissing)
	}
	if diff := cmp.Diff(before, g.r.Journal.Entries()); diff != "" {
		t.Errorf("journal (-before +after):\n%s", diff)
	}
}

// afterCreate is a gpu.Manager that calls after with each device it
// creates.
type afterCreate struct {
	gpu.Manager
	after func(d mig.Device)
}

func (c *afterCreate) CreateMIGDevice(ctx context.Context, idx int, d mig.Device) (gpu.MIGDevice, error) {
	md, err := c.Manager.CreateMIGDevice(ctx, idx, d)
	if err == nil {
		c.after(d)
	}
	return md, err
}

// TestComputeInstanceMissingAfterApplyIsNotReady: a GPU whose change went
// through but whose final observation shows a GPU instance without its
// compute instance (a CI create NVML reported but did not do) is not Ready:
// its device is not published, and the pass retries it.
func TestComputeInstanceMissingAfterApplyIsNotReady(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	// A CI create reported but not done.
	g.r.GPUs = &afterCreate{Manager: g.mgr, after: func(d mig.Device) {
		if d.String() == "3g.40gb@4" {
			g.removeCI(t, 0, 4)
		}
	}}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhasePending {
		t.Errorf("GPU 0: %+v, want Pending (its 3g.40gb@4 has no compute instance)", got)
	}
	if !res.Retry {
		t.Error("Retry = false")
	}
}

// TestStoppedStepIsNoFailedPass: a step the agent's stopping cancels says
// so, and is not counted in miglayout_agent_failed_passes_total.
func TestStoppedStepIsNoFailedPass(t *testing.T) {
	g, _ := metricsRig(t, "1xA100-SXM4-80GB")
	got := g.r.failure(fmt.Errorf("creating 3g.40gb@0: %w", context.Canceled))
	if !strings.Contains(got.Message, "the agent is stopping") {
		t.Errorf("message %q does not say the agent is stopping", got.Message)
	}
	if n := testutil.ToFloat64(g.r.Metrics.failedPasses); n != 0 {
		t.Errorf("miglayout_agent_failed_passes_total = %v for a stopped step, want 0", n)
	}
}

// TestUnknownAllocationWhileDrainingEndsTheEntry: a GPU whose change stops
// after the drain, before its NVML work, on an allocation under a name the
// agent does not publish seen by the live re-check, ends its journal entry
// (KeepMode), as one stopped on an allocation of a drained device does.
func TestUnknownAllocationWhileDrainingEndsTheEntry(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached, g.alloc.live = sets.New[string](), sets.New("gpu-0-mig-foreign")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonUnknownAllocation {
		t.Errorf("GPU 0 %s/%s, want Blocked/UnknownAllocation", got.Phase, got.Reason)
	}
	if entries := g.r.Journal.Entries(); len(entries) != 0 {
		t.Errorf("journal %+v, want the stopped change's Draining entry ended", entries)
	}
}

// TestGPUUnreadableAtPlanningIsNotMissing: a GPU NVML cannot read when the
// pass plans, readable again by its final observation, is judged from that
// observation (here Ready on its layout), never reported as a GPU the node
// lacks (GPUMissing).
func TestGPUUnreadableAtPlanningIsNotMissing(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.setup(t, 1, "7g.80gb@0")
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	g.r.Sleep = func(context.Context, time.Duration) error { return g.sim.RecoverGPU(1) }
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[1]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1: %+v, want Ready from the final observation", got)
	}
}

// ignoredModeSet is a gpu.Manager whose SetMIGMode reports success but
// changes nothing: it answers the mode NVML holds.
type ignoredModeSet struct{ gpu.Manager }

func (m ignoredModeSet) SetMIGMode(ctx context.Context, idx int, _ bool) (gpu.MIGMode, error) {
	gpus, err := m.Manager.GPUs(ctx)
	if err != nil {
		return gpu.MIGMode{}, err
	}
	for _, g := range gpus {
		if g.Index == idx {
			return g.MIGMode, nil
		}
	}
	return gpu.MIGMode{}, fmt.Errorf("no GPU %d", idx)
}

// TestCancelLeftPendingIsAnNVMLError: a cancel of a pending MIG mode
// change that NVML accepts but that leaves the change pending is the GPU's
// failure (Failed/NVMLError, saying so), not a change made.
func TestCancelLeftPendingIsAnNVMLError(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := t.Context()
	pid := g.pendEnable(t)
	g.r.GPUs = ignoredModeSet{g.mgr}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError || !strings.Contains(got.Message, "still pending") {
		t.Errorf("GPU 0: %+v, want Failed/NVMLError saying the change is still pending", got)
	}
	if res.Changed.Has(0) {
		t.Error("GPU 0 counted as changed")
	}
	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
}

// TestJournalUnwritableBeforeDisableLeavesMIGOn: the journal becomes
// unwritable once the GPU's last device is destroyed: MIG mode is not
// disabled unjournaled; the GPU says what was done.
func TestJournalUnwritableBeforeDisableLeavesMIGOn(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.r.GPUs = &afterDestroy{Manager: g.mgr, after: func() { unwritableJournal(t, g) }}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable || !strings.Contains(got.Message, "7g.80gb@0") {
		t.Errorf("GPU 0: %+v, want Failed/%s naming the destroyed 7g.80gb@0", got, ReasonJournalUnwritable)
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || !st.MIGPending {
		t.Errorf("MIG current %t pending %t, want MIG mode left on", st.MIGCurrent, st.MIGPending)
	}
}

// afterModeSet is a gpu.Manager that calls after once a SetMIGMode
// succeeds.
type afterModeSet struct {
	gpu.Manager
	after func()
}

func (a *afterModeSet) SetMIGMode(ctx context.Context, idx int, enabled bool) (gpu.MIGMode, error) {
	mode, err := a.Manager.SetMIGMode(ctx, idx, enabled)
	if err == nil && a.after != nil {
		after := a.after
		a.after = nil
		after()
	}
	return mode, err
}

// TestPendingModeAfterChangeIsNotReady: a GPU the pass brought to MIG off
// whose final observation shows a MIG mode change pending (another NVML
// client enabled MIG meanwhile, under a process) does not hold its spec:
// it is not Ready, and the pass retries it.
func TestPendingModeAfterChangeIsNotReady(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	ctx := t.Context()
	g.r.GPUs = &afterModeSet{Manager: g.mgr, after: func() { g.pendEnable(t) }}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase == v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v with an enable pending, want it not Ready", got)
	}
	if !res.Retry {
		t.Error("Retry = false")
	}
}

// TestInvalidLayoutLeavesAgentsPendingDisable: the agent's MIG disable is
// pending (another NVML client holds the GPU, in MIG mode without devices)
// when the spec turns to a layout refused as InvalidLayout. The journal
// records that the agent turned MIG mode off, not on: the refusal does not
// set the mode again, nor say it turned MIG on for the layout.
func TestInvalidLayoutLeavesAgentsPendingDisable(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	client := g.leaveDisablePending(t)
	var modeSets []int
	g.r.GPUs = &afterModeSet{Manager: g.mgr, after: func() { modeSets = append(modeSets, 0) }}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonInvalidLayout || strings.Contains(got.Message, "turned on for this layout") {
		t.Errorf("GPU 0: %+v, want InvalidLayout, not saying MIG mode was turned on for it", got)
	}
	if len(modeSets) != 0 {
		t.Error("MIG mode set again for a refused layout")
	}
	if err := g.sim.CloseClient(client); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledPendingModeIsJournaled: the agent's MIG disable is pending
// when the spec asks for MIG on again; the pass cancels the disable (sets
// MIG mode on) and then fails a create. The journal entry the GPU keeps
// records the mode the agent last asked NVML for: on (ModeSet true), not
// the disable it cancelled.
func TestCancelledPendingModeIsJournaled(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	if err := g.sim.CloseClient(g.leaveDisablePending(t)); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Reason != v1alpha1.ReasonNVMLError {
		t.Fatalf("GPU 0: %+v, want the failed create's NVMLError", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || !st.MIGPending {
		t.Fatalf("MIG current %v pending %v, want the disable cancelled", st.MIGCurrent, st.MIGPending)
	}
	entries := g.r.Journal.Entries()
	if len(entries) != 1 || entries[0].ModeSet == nil || !*entries[0].ModeSet {
		t.Errorf("journal %+v, want GPU 0's entry with ModeSet true", entries)
	}
}

// TestJournalUnwritablePartWayThroughCreatesSaysWhatWasDone: the journal
// becomes unwritable after the first of two creates: the GPU's result says
// the repartitioning stopped part way and names the device created, not
// that it was not repartitioned.
func TestJournalUnwritablePartWayThroughCreatesSaysWhatWasDone(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	g.r.GPUs = &afterCreate{Manager: g.mgr, after: func(mig.Device) { unwritableJournal(t, g) }}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable || !strings.Contains(got.Message, "stopped part way (done: 3g.40gb@") {
		t.Errorf("GPU 0: %+v, want Failed/%s naming the device created", got, ReasonJournalUnwritable)
	}
}

// TestJournalRecordCarriesOver: Record keeps an entry's Started and, for the
// same GPU (UUID), the MIG mode the agent set; a GPU of another UUID at the
// index (the board swapped) inherits no ModeSet. The entry read back from
// the file is the one in memory.
func TestJournalRecordCarriesOver(t *testing.T) {
	var now time.Time
	tick := func() time.Time { now = now.Add(time.Minute); return now }
	on := true
	tests := map[string]struct {
		second      JournalEntry
		wantModeSet *bool
	}{
		"same GPU": {
			second:      JournalEntry{GPU: 0, UUID: "GPU-a", Step: StepCreating},
			wantModeSet: &on,
		},
		"another GPU at the index": {
			second: JournalEntry{GPU: 0, UUID: "GPU-b", Step: StepCreating},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := t.TempDir() + "/journal.json"
			j, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			j.now = tick
			if err := j.Record(JournalEntry{GPU: 0, UUID: "GPU-a", Step: StepSettingMIGMode, ModeSet: &on}); err != nil {
				t.Fatal(err)
			}
			started := now
			if err := j.Record(tc.second); err != nil {
				t.Fatal(err)
			}
			want := tc.second
			want.Started, want.Updated, want.ModeSet = started, now, tc.wantModeSet
			if diff := cmp.Diff([]JournalEntry{want}, j.Entries()); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			reread, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(j.Entries(), reread.Entries()); diff != "" {
				t.Errorf("entries read back (-memory +file):\n%s", diff)
			}
		})
	}
}

// TestJournalInFlightOfForeignEntry: an entry whose step is Creating but
// whose Done holds fewer devices than its Destroy (a journal the agent did
// not write so) names no device in flight, rather than a wrong one or none
// at all by a crash.
func TestJournalInFlightOfForeignEntry(t *testing.T) {
	e := JournalEntry{GPU: 0, Step: StepCreating, Destroy: []string{"3g.40gb@0", "3g.40gb@4"}, Create: []string{"7g.80gb@0"}}
	if d, ok := e.inFlight(); ok {
		t.Errorf("in flight %q, want none", d)
	}
}

// TestWithdrawalWithPendingTaintsDroppedGoesOn: the withdrawal's
// publication was served, but the API server dropped the taints of devices
// a pending MIG mode change removes (ErrDrainTaintsDropped): the drained
// devices are out of the pool all the same, so the GPU is repartitioned.
func TestWithdrawalWithPendingTaintsDroppedGoesOn(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.inv.failWithdraw = fmt.Errorf("waiting for the API server to serve pool n1: %w", ErrDrainTaintsDropped)
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatalf("pass failed: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", got)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
}

// honoursContext is an Inventory that publishes nothing under a done
// context, as a client of the API server does.
type honoursContext struct{ Inventory }

func (h honoursContext) Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return h.Inventory.Publish(ctx, gpus, draining)
}

// TestStopDuringWithdrawalRestoresUnderAClientThatHonoursTheStop: as
// TestStopDuringWithdrawalRestoresThePool, with an API client that refuses
// calls on the stopped agent's context: the restore is made on a context
// of its own, so the pool is published again as NVML has it.
func TestStopDuringWithdrawalRestoresUnderAClientThatHonoursTheStop(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g.r.Inventory = honoursContext{&stopOnWithdrawal{fakeInventory: g.inv, stop: cancel}}
	if _, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); err == nil {
		t.Fatal("the pass succeeded although stopped during its withdrawal")
	}
	want := publication{devices: []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}}
	if diff := cmp.Diff(want, g.inv.last(), cmp.AllowUnexported(publication{})); diff != "" {
		t.Errorf("last publication (-want +got): the pool is left without devices that exist\n%s", diff)
	}
}

// TestUnknownNameOfAGPUWhoseMinorIsItsIndex: a GPU whose minor number is
// its index (the common case) gets an unknown name of it once.
func TestUnknownNameOfAGPUWhoseMinorIsItsIndex(t *testing.T) {
	r := &Repartitioner{Inventory: &fakeInventory{}, counted: sets.New(0)}
	obs := []GPUState{{GPU: gpu.GPU{Index: 0, Minor: 0}}}
	want := unknownAllocations{0: {"gpu-0-mig-3g40gb-9-4"}}
	if diff := cmp.Diff(want, r.unknownIn(sets.New("gpu-0-mig-3g40gb-9-4"), obs)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestHoldersNoteIsBounded: a GPU Blocked on many held devices names the
// holders of the first four (by name), then how many more; a claim
// reserved for many pods names three of them, then how many more.
func TestHoldersNoteIsBounded(t *testing.T) {
	var objs []client.Object
	busy := sets.New[string]()
	for i := range 6 {
		dev := fmt.Sprintf("gpu-0-mig-1g10gb-19-%d", i)
		busy.Insert(dev)
		claim := allocatedClaim(fmt.Sprintf("c%d", i)).device(dev, false).obj()
		for p := range 5 {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("p%d", p)})
		}
		objs = append(objs, claim)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	r := &Repartitioner{Allocations: &ClaimAllocations{Cached: c, Live: c, Driver: testDriver, Pool: "n1"}}
	got := r.holdersNote(t.Context(), busy)
	want := "; gpu-0-mig-1g10gb-19-0 is held by ResourceClaim default/c0 (pod p0, p1, p2, 2 more)" +
		"; gpu-0-mig-1g10gb-19-1 is held by ResourceClaim default/c1 (pod p0, p1, p2, 2 more)" +
		"; gpu-0-mig-1g10gb-19-2 is held by ResourceClaim default/c2 (pod p0, p1, p2, 2 more)" +
		"; gpu-0-mig-1g10gb-19-3 is held by ResourceClaim default/c3 (pod p0, p1, p2, 2 more)" +
		"; 2 more"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("note (-want +got):\n%s", diff)
	}
}

// TestPlanGPUMIGOffWithPendingEnableOnUncataloguedGPU: a spec asking for MIG
// off on a GPU of no catalogued model whose MIG enable is pending (set by
// another tool) is not met: at the next reset the GPU goes into MIG mode.
// The GPU is reported (UnknownGPU), not Ready.
func TestPlanGPUMIGOffWithPendingEnableOnUncataloguedGPU(t *testing.T) {
	r := &Repartitioner{}
	g := gpu.GPU{Index: 0, ProductName: "NVIDIA Future GPU", MIGCapable: true, MIGMode: gpu.MIGMode{Current: false, Pending: true}}
	_, res := r.planGPU([]GPUState{{GPU: g}}, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false}, sets.New[string]())
	if res == nil || res.Phase == v1alpha1.PhaseReady {
		t.Errorf("MIG off with an enable pending: %+v, want not Ready", res)
	}
}

// TestDeviceDestroyedBehindTheAgentsBack: a device the plan destroys is
// gone by the time the GPU's lock is taken (another tool destroyed it):
// NVML's not found is the destroy done, and the change goes on.
func TestDeviceDestroyedBehindTheAgentsBack(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.locks.onBegin = func() {
		g.locks.onBegin = nil
		if err := g.mgr.DestroyMIGDevice(t.Context(), 0, mig.Device{Profile: "3g.40gb", Start: 4}); err != nil {
			t.Fatal(err)
		}
	}
	g.syncReady(t, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")})
	g.wantLayouts(t, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
}

// TestPendingModeCancelledUnderClaimIsJournaled: the agent's pending MIG
// enable, cancelled because a claim holds the whole GPU it removes, is
// journaled as cancelled: the GPU's entry records the mode the agent last
// asked NVML for, off.
func TestPendingModeCancelledUnderClaimIsJournaled(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	specs := g.leaveEnablePending(t)
	if entries := g.r.Journal.Entries(); len(entries) != 1 || entries[0].ModeSet == nil || !*entries[0].ModeSet {
		t.Fatalf("journal %+v, want GPU 0's enable recorded", entries)
	}
	g.alloc.cached = sets.New("gpu-0")
	if _, err := g.r.Sync(t.Context(), specs, nil); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
		t.Fatalf("MIG current %t pending %t, want the enable cancelled", st.MIGCurrent, st.MIGPending)
	}
	if entries := g.r.Journal.Entries(); len(entries) != 1 || entries[0].ModeSet == nil || *entries[0].ModeSet {
		t.Errorf("journal %+v, want GPU 0's entry with ModeSet false", entries)
	}
}

// leaveDisablePending has the agent disable MIG mode on GPU 0 (a 7g.80gb
// device before) while another NVML client holds the GPU: the device is
// destroyed and the disable left pending. It returns the client, for the
// caller to close.
func (g *rig) leaveDisablePending(t *testing.T) uint64 {
	t.Helper()
	g.setup(t, 0, "7g.80gb@0")
	client, err := g.sim.OpenClient(g.sim.Snapshot().GPUs[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{{Index: 0}}, nil); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || st.MIGPending || len(st.GPUInstances) != 0 {
		t.Fatalf("MIG current %v pending %v, %d GPU instances; want the disable pending, no device left", st.MIGCurrent, st.MIGPending, len(st.GPUInstances))
	}
	return client
}
