package controller

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAutoLeavesGPUTurningMIGOffAlone: a Static MigLayout turned n1's GPU 0
// MIG off (rule migEnabled: false); its agent is carrying that out
// (Repartitioning: destroying the 7g.80gb, then disabling MIG) when the
// operator switches the MigLayout to Auto mode, which takes the node over
// with its Static spec. GPU 0 is changing: Auto mode never changes MIG mode
// nor a GPU whose change is in flight, so p1 gets no 3g.40gb there and the
// spec still turns MIG off (on an A100, MIG on again would need a reset).
func TestAutoLeavesGPUTurningMIGOffAlone(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml, a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseRepartitioning, "Repartitioning", "destroy 7g.80gb@0; MIG off"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specMIGOff(0, `rule "off": MIG off`)}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1,
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	spec := h.nml("n1").Spec.GPUs
	if len(spec) != 1 || spec[0].MIGEnabled {
		t.Errorf("n1/gpu-0, being turned MIG off by its agent, was planned again: spec %+v; want its MIG-off spec kept", spec)
	}
}
