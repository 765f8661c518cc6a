package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestRefusesWhatNVMLDoesNotOfferOnAGPUWithMIGOff: the driver offers 3g.40gb
// only at 4+4. The agent has read that table already (the GPU was in MIG
// mode earlier in this process: the table is fixed while the driver is
// loaded), then the spec took the GPU back to a whole GPU. A spec asking
// again for MIG with 3g.40gb@0 is refused as InvalidLayout before anything
// is touched: the whole-GPU device is not drained, MIG mode is not turned
// on, and the GPU stays a whole GPU, as on a GPU whose MIG mode is on.
func TestRefusesWhatNVMLDoesNotOfferOnAGPUWithMIGOff(t *testing.T) {
	g := rightHalfOnlyRig(t)
	ctx := t.Context()

	// MIG on: the agent reads NVML's profile table and reports it.
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4")}, nil)
	if err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("first pass: %+v, %v", res.Results[0], err)
	}
	if _, ok := res.GPUs[0].GPU.NVMLPlacements["3g.40gb"]; !ok {
		t.Fatalf("NVML's 3g.40gb placements not read with MIG on: %+v", res.GPUs[0].GPU.NVMLPlacements)
	}
	// Back to a whole GPU.
	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil || res.Results[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("MIG off pass: %+v, %v", res.Results[0], err)
	}
	pubs := len(g.inv.pubs)

	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, "NVML offers 3g.40gb at 4+4 only") {
		t.Errorf("result %+v, want Failed/InvalidLayout saying NVML offers 3g.40gb at 4+4 only", r)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
		t.Errorf("MIG mode current %t pending %t: the GPU was switched to MIG mode for a layout NVML refuses", st.MIGCurrent, st.MIGPending)
	}
	for _, pub := range g.inv.pubs[pubs:] {
		if len(pub.draining) > 0 {
			t.Errorf("drained %v for a layout NVML refuses", pub.draining)
		}
	}
	if last := g.inv.last(); len(last.devices) != 1 || last.devices[0] != "gpu-0" {
		t.Errorf("published %v, want the whole GPU still published", last.devices)
	}
}

// TestRefusedWithMIGModeOffWhereNVMLAnswers: the agent has never seen the
// GPU in MIG mode, but its driver answers the profile table with MIG mode
// off (580 does: pkg/mig/gpu's testdata/nvml-traces), so a layout with
// 3g.40gb@0, which NVML offers at 4+4 only, is refused as InvalidLayout on
// the first pass without MIG mode being turned on or the whole GPU being
// drained.
func TestRefusedWithMIGModeOffWhereNVMLAnswers(t *testing.T) {
	g := rightHalfOnlyRig(t)
	counted := &modeSetCounter{NVMLManager: g.mgr.(*gpu.NVMLManager)}
	g.r.GPUs = counted
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, "NVML offers 3g.40gb at 4+4 only") {
		t.Errorf("result %+v, want Failed/InvalidLayout saying NVML offers 3g.40gb at 4+4 only", r)
	}
	if counted.sets != 0 {
		t.Errorf("MIG mode was set %d times for a layout NVML's table, read with MIG mode off, refuses", counted.sets)
	}
	for _, pub := range g.inv.pubs {
		if len(pub.draining) > 0 {
			t.Errorf("drained %v for a layout NVML refuses", pub.draining)
		}
	}
}

// TestRefusedOnceMIGIsFirstEnabledTurnsMIGOffAgain: the agent has never
// seen the GPU in MIG mode and its driver answers no profile with MIG mode
// off (nvml.h), so NVML's profile table (3g.40gb at 4+4 only) is read only
// once MIG mode is on for a layout with 3g.40gb@0. Nothing is created: MIG
// mode goes off again, the whole GPU is published again, and the GPU is
// InvalidLayout saying what NVML offers; the next pass refuses the layout
// without touching the GPU.
func TestRefusedOnceMIGIsFirstEnabledTurnsMIGOffAgain(t *testing.T) {
	g := nvmlhA100RigWith(t, rightHalfOnly3g(t))
	ctx := t.Context()
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent {
		t.Fatal("the rig's GPU starts in MIG mode: the test does not bite")
	}

	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout ||
		!strings.Contains(r.Message, "NVML offers 3g.40gb at 4+4 only") || !strings.Contains(r.Message, "MIG mode is turned off again") {
		t.Errorf("result %+v, want Failed/InvalidLayout saying NVML offers 3g.40gb at 4+4 only and MIG mode is off again", r)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending || len(st.GPUInstances) != 0 {
		t.Errorf("GPU left with MIG current %t pending %t, GPU instances %v; want MIG off as before", st.MIGCurrent, st.MIGPending, st.GPUInstances)
	}
	if last := g.inv.last(); len(last.devices) != 1 || last.devices[0] != "gpu-0" {
		t.Errorf("published %v, want the whole GPU again", last.devices)
	}

	pubs := len(g.inv.pubs)
	res, err = g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Errorf("second pass: %+v, want InvalidLayout at once", r)
	}
	for _, pub := range g.inv.pubs[pubs:] {
		if len(pub.draining) > 0 {
			t.Errorf("second pass drained %v for a layout NVML refuses", pub.draining)
		}
	}
}

// TestRefusedOnceEnabledWithAnotherGPULost: as
// TestRefusedOnceMIGIsFirstEnabledTurnsMIGOffAgain (a driver that answers
// no profile with MIG mode off) on a node whose other
// GPU has fallen off the bus: the GPU read once MIG mode is on is read
// (the other one's error aside), so its layout is still checked against
// its profile table, and MIG mode turned off again.
func TestRefusedOnceEnabledWithAnotherGPULost(t *testing.T) {
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", rightHalfOnly3g(t))
	if err != nil {
		t.Fatal(err)
	}
	g := newRigOver(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Catalog: hardware}, gputest.OnlyInMIGMode)
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := g.sim.Snapshot().GPUs[0]
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout || st.MIGCurrent || st.MIGPending {
		t.Errorf("GPU 0 %+v, MIG current %t pending %t, GPU instances %v; want InvalidLayout with MIG mode off again, as with no GPU lost",
			r, st.MIGCurrent, st.MIGPending, st.GPUInstances)
	}
}

// rightHalfOnlyRig is a rig over an A100 whose driver offers 3g.40gb at
// memory slices 4+4 only (the catalog also has 0+4).
func rightHalfOnlyRig(t *testing.T) *rig {
	t.Helper()
	return newA100RigWith(t, rightHalfOnly3g(t))
}

// rightHalfOnly3g is the A100's 3g.40gb at memory slices 4+4 only.
func rightHalfOnly3g(t *testing.T) mig.Profile {
	t.Helper()
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	three, err := a100.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	rightOnly := *three
	rightOnly.Placements = []mig.Placement{{Start: 4, Size: 4}}
	return rightOnly
}

// TestRefusedAfterARestartWithoutTurningMIGOn: the agent that turned MIG
// mode on to read NVML's profile table (its driver answers none with MIG
// mode off), refused the layout and turned MIG mode off again kept the
// table in its state directory; restarted, it refuses the same layout from
// the kept table without setting MIG mode (on Ampere each such change waits
// for a GPU reset).
func TestRefusedAfterARestartWithoutTurningMIGOn(t *testing.T) {
	g := nvmlhA100RigWith(t, rightHalfOnly3g(t))
	ctx := t.Context()
	tables := filepath.Join(g.dir, "nvml-profiles.json")
	g.mgr.(*gpu.NVMLManager).KeepProfileTables(ctx, tables)
	want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	res, err := g.r.Sync(ctx, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, "MIG mode is turned off again") {
		t.Fatalf("first pass %+v, want InvalidLayout once MIG mode is on, and MIG mode off again", r)
	}

	restarted, err := gpu.NewNVML(gputest.OnlyInMIGMode(g.sim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Shutdown() })
	restarted.KeepProfileTables(ctx, tables)
	counted := &modeSetCounter{NVMLManager: restarted}
	j, err := OpenJournal(filepath.Join(g.dir, "journal.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Repartitioner{GPUs: counted, Inventory: g.inv, Allocations: g.alloc, Prepared: g.prep, Locks: g.locks, Journal: j,
		SettlePeriod: time.Second, Sleep: func(context.Context, time.Duration) error { return nil }}
	if res, err = r.Sync(ctx, want, nil); err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(r.Message, "NVML offers 3g.40gb at 4+4 only") {
		t.Errorf("after a restart %+v, want InvalidLayout saying NVML offers 3g.40gb at 4+4 only", r)
	}
	if counted.sets != 0 {
		t.Errorf("after a restart MIG mode was set %d times for a layout the kept table refuses", counted.sets)
	}
}

// modeSetCounter counts SetMIGMode calls.
type modeSetCounter struct {
	*gpu.NVMLManager
	sets int
}

func (c *modeSetCounter) SetMIGMode(ctx context.Context, idx int, enabled bool) (gpu.MIGMode, error) {
	c.sets++
	return c.NVMLManager.SetMIGMode(ctx, idx, enabled)
}
