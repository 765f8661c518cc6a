package controller

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestChangeTurningMIGOffIsNeverCancelled: a change turning MIG off
// (written in Static mode) is no layout change Auto mode cancels, blocked
// by a device in use, refused by the agent or not yet started: cancelling
// it would write the GPU's actual MIG layout back, turning MIG on again
// against the operator's change.
func TestChangeTurningMIGOffIsNeverCancelled(t *testing.T) {
	for name, st := range map[string]*gpuBuilder{
		"blocked by a device in use": a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use"),
		"refused as invalid":         a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidLayout, "refused"),
		"draining":                   a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, ""),
		"ready, not started":         a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseReady, "", ""),
	} {
		t.Run(name, func(t *testing.T) {
			spec := specMIGOff(0, "static")
			spec.ServedPods = []string{"ns/p1"}
			nml := nodeMigLayout("n1").spec(spec).status(st).build()
			if c, ok := cancelOf(nml, 0); ok {
				t.Errorf("cancelOf gave %s -> %s (%s), want no cancel of a change turning MIG off", c.From, c.To, c.Reason)
			}
			if c, ok := undestroyed(nml, 0); ok {
				t.Errorf("undestroyed gave %s -> %s (%s), want no cancel of a change turning MIG off", c.From, c.To, c.Reason)
			}
		})
	}
}

// TestBlockedMIGOffHoldsNoSlot: a change turning MIG off (a Static rule's,
// kept through a switch to Auto) that a device in use blocks, which may
// last for days, is not cancelled, and holds none of the node's
// maxGPUsPerNode slots either (as a blocked change of layout holds none):
// the node's free whole GPU is changed for a pending pod meanwhile.
func TestBlockedMIGOffHoldsNoSlot(t *testing.T) {
	ml := autoMigLayout("auto", nil) // maxGPUsPerNode 1
	n1 := autoNML("n1", ml,
		a100(0).layout("3g.40gb@0").inUse("3g.40gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "3g.40gb@0 is allocated to claim ns/busy"),
		a100(1).layout("7g.80gb@0"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specMIGOff(0, `rule "off": MIG off`)}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1,
		autoClaim("c1", profileSelector("4g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	spec := h.nml("n1").Spec.GPUs
	if len(spec) != 2 || spec[0].MIGEnabled || spec[0].Index != 0 {
		t.Fatalf("spec %+v: want GPU 0's change to MIG off kept, and GPU 1 planned", spec)
	}
	if l := spec[1].Layout; !strings.HasPrefix(l, "4g.40gb@0") {
		t.Errorf("GPU 1 (free, whole) planned %q for p1, want a 4g.40gb@0; events %v", l, h.events())
	}
}
