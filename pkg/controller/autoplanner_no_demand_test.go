package controller

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestSparesMadeWithNoPodPending: an Auto MigLayout whose policy keeps
// spare devices has them made though no pod waits: the pass runs the
// planner for the spares alone, and a 1g.10gb is made on n1's GPU, which
// holds no device yet.
func TestSparesMadeWithNoPodPending(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{Spares: map[string]int32{"1g.10gb": 1}})
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("")))
	h.settle()
	spec := h.nml("n1").Spec.GPUs
	if len(spec) != 1 || !layoutHas(spec[0].Layout, "1g.10gb") {
		t.Errorf("n1's spec %+v, want a spare 1g.10gb made on GPU 0", spec)
	}
}

// TestBlockedChangeCancelledWithNoPodPending: n1's GPU 0 was to become
// two 3g.40gb for a pod since deleted, and the agent is blocked by a
// 1g.10gb allocated meanwhile. No pod is pending, yet the pass cancels the
// blocked change back to the GPU's actual layout: otherwise the GPU would
// stay blocked, holding its slot of the limits on GPUs changing at once,
// until the device in use is released.
func TestBlockedChangeCancelledWithNoPodPending(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml, a100(0).layout("1g.10gb@0").inUse("1g.10gb@0").
		phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "1g.10gb@0 is allocated"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "for gone", ServedPods: []string{"ns/gone"}}}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1)
	h.settle()
	if diff := cmp.Diff(map[int32]string{0: "1g.10gb@0"}, h.specOf("n1")); diff != "" {
		t.Errorf("n1's desired layouts (-want +got):\n%s", diff)
	}
}

// layoutHas reports whether layout (as written in a GPUSpec) places a
// device of profile.
func layoutHas(layout, profile string) bool {
	l, err := mig.ParseLayout(layout)
	return err == nil && slices.ContainsFunc(l, func(d mig.Device) bool { return d.Profile == profile })
}

// TestLostCancelWithNoChangeStillWritesStatus: the pass's only write is
// the cancel of n1's blocked change (its pod deleted), and n1's agent
// started a pass before it was written, so it is not. No change of the
// plan waits on that cancel: the pass is not held back, and writes
// status.auto as for any plan.
func TestLostCancelWithNoChangeStillWritesStatus(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml, a100(0).layout("7g.80gb@0").inUse("7g.80gb@0").
		phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "for gone", ServedPods: []string{"ns/gone"}}}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1)
	h.a.Client = &startsPassOnRead{Client: h.c, node: "n1"}
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@0,3g.40gb@4" {
		t.Fatalf("n1/gpu-0 desired %q, want the change its agent started on kept", got)
	}
	if st := h.autoStatus(); st == nil {
		t.Errorf("no status.auto written by the pass")
	}
}

// TestNoPlannerRunWithNothingToDo: with no pod pending, no spares kept, no
// idle GPU due to be given back and no change in flight to cancel, a pass
// writes the Auto status without running the planner.
func TestNoPlannerRunWithNothingToDo(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")))
	runs := plannerRuns(t)
	h.settle()
	if got := plannerRuns(t) - runs; got != 0 {
		t.Errorf("the planner ran %d time(s), want none", got)
	}
	if st := h.autoStatus(); st == nil {
		t.Errorf("no status.auto written by the pass")
	}
}
