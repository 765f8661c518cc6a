package controller

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPendingRowNotExplainedByReadyReason: the most common Pending: the
// controller has just written a new desired layout and the agent has not
// acted on it yet. Its status still says what every Ready GPU says
// (LayoutApplied, "layout applied"), which the node's row does not give as
// the reason the GPU is Pending.
func TestPendingRowNotExplainedByReadyReason(t *testing.T) {
	nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
		status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, "layout applied")).build()
	st := EvaluateNode("n", nml, nil, AgentHealth{})
	if strings.Contains(st.Row.Message, v1alpha1.ReasonLayoutApplied) {
		t.Errorf("row message %q gives the Ready GPU's LayoutApplied as why GPU 0 is Pending", st.Row.Message)
	}
}

// TestExistingDeviceOnGPUThisPlanChanges: the plan repartitions GPU 0
// (1g.10gb@0 free, 3g.40gb@4 added for p1) and gives p2 the 1g.10gb@0 that
// exists already and that the change keeps: p2 can be allocated now, so it
// hears no WaitingForRepartition and is not counted in
// waitingForRepartitionPods. Only p1 waits for the repartition.
func TestExistingDeviceOnGPUThisPlanChanges(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("1g.10gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"),
		autoClaim("c2", profileSelector("1g.10gb")), autoPod("p2", h0(), "c2"))
	h.settle()
	for _, e := range h.events() {
		if strings.Contains(e, EventWaitingForRepartition) && strings.Contains(e, "gpu-0-mig-1g10gb") {
			t.Errorf("pod given the existing free device 1g.10gb@0 heard %q", e)
		}
	}
	if s := h.autoStatus(); s == nil || s.WaitingForRepartitionPods != 1 {
		t.Errorf("status.auto = %+v, want waitingForRepartitionPods 1 (p1 only: p2's device exists)", s)
	}
}
