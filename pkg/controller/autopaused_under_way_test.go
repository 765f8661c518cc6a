package controller

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPausedNodesChangeUnderWayStillServesItsPod: p1's 3g.40gb comes with a
// change of n1's GPU 0. n1's MigLayout a is then paused; a pause lets a
// change under way finish (its agent carries it out), so p1's device still
// comes: no GPU of MigLayout b's n2 is repartitioned for p1 too, and p1 is
// told it waits for n1's GPU. A change the agent has not started (the GPU
// still Draining on its old layout) is dropped by the pause and brings
// nothing: p1 is then planned on n2.
func TestPausedNodesChangeUnderWayStillServesItsPod(t *testing.T) {
	for name, tc := range map[string]struct {
		phase   v1alpha1.GPUPhase
		message string
		onN2    bool
	}{
		"under way": {phase: v1alpha1.PhaseRepartitioning, message: "creating 3g.40gb@4"},
		"not begun": {phase: v1alpha1.PhaseDraining, message: "draining gpu-0-mig-7g80gb-0-0", onN2: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := pausedChangeFor(t, true, a100(0).layout("7g.80gb@0").phase(tc.phase, string(tc.phase), tc.message))
			got, changed := h.specOf("n2")[0]
			if changed != tc.onN2 {
				t.Fatalf("n2/gpu-0 changed %v (to %q), want %v (events %q)", changed, got, tc.onN2, h.events())
			}
			want := "n1/gpu-0"
			if tc.onN2 {
				want = "n2/gpu-0"
			}
			told := false
			for _, e := range h.events() {
				told = told || strings.Contains(e, EventWaitingForRepartition) && strings.Contains(e, want)
			}
			if !told {
				t.Errorf("p1 not told it waits for %s: events %q", want, h.events())
			}
		})
	}
}

// TestPausedNodesChangeDoneStillServesItsPod: once the change a paused
// node's agent finished for p1 is done (the GPU Ready on it), its free
// 3g.40gb waits for p1 until kube-scheduler binds it, as on a node that is
// not paused: no GPU of n2 is changed for p1 meanwhile.
func TestPausedNodesChangeDoneStillServesItsPod(t *testing.T) {
	for _, paused := range []bool{false, true} {
		h := pausedChangeFor(t, paused, a100(0).layout("3g.40gb@4"))
		if got, changed := h.specOf("n2")[0]; changed {
			t.Errorf("paused %v: n2/gpu-0 changed to %q for p1, whose device is free on n1 (events %q)", paused, got, h.events())
		}
	}
}

// pausedChangeFor is a settled cluster of two Auto MigLayouts: a (paused
// where paused is set) on n1, whose GPU 0 (reported as gpu0) is asked for
// 3g.40gb@4 for the pending pod p1 (one 3g.40gb), and b on n2, whose GPU 0
// holds a free 7g.80gb.
func pausedChangeFor(t *testing.T, paused bool, gpu0 *gpuBuilder) *autoCluster {
	t.Helper()
	a, b := autoMigLayout("a", nil), autoMigLayout("b", nil)
	a.Spec.Paused = paused
	n1 := autoNML("n1", a, gpu0)
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@4", "serves 1 pending pod(s): ns/p1")}
	n1.Spec.GPUs[0].ServedPods = []string{"ns/p1"}
	h := newAutoCluster(t, b,
		a, node("n1", map[string]string{"pool": "a"}), n1,
		node("n2", map[string]string{"pool": "b"}), autoNML("n2", b, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	return h
}
