package controller

import (
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
