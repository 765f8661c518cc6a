package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
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

// TestAutoGPUTurningMIGOffFailedOnNVMLHoldsNoSlot: GPU 0's spec turns MIG
// off and the agent's pass failed on NVML (Failed/NVMLError), which it
// retries with backoff, perhaps for ever. Like a MIG-on change that failed
// so (TestFailedChanges), the GPU is in flight but retrying: it holds no
// slot of the limits on GPUs changing at once, or a node with
// maxGPUsPerNode 1 would never change its other GPUs again.
func TestAutoGPUTurningMIGOffFailedOnNVMLHoldsNoSlot(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{specMIGOff(0, `rule "off": MIG off`)}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
			Layout: "7g.80gb@0", Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "m"}}}}
	gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)
	if len(gpus) != 1 {
		t.Fatalf("%d GPUs, want 1", len(gpus))
	}
	if !gpus[0].Changing || !gpus[0].Retrying {
		t.Errorf("GPU turning MIG off, failed on NVML: changing %t retrying %t, want both (in flight, retried by the agent, no slot held)", gpus[0].Changing, gpus[0].Retrying)
	}
}
