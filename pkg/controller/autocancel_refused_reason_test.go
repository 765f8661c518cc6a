package controller

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestBlockedCancelReasonSaysWhy: the cancel of a blocked change says why
// it is cancelled: blocked by a device in use, or refused by the agent
// with the agent's reason, with the agent's message in both cases.
func TestBlockedCancelReasonSaysWhy(t *testing.T) {
	for name, tc := range map[string]struct {
		phase          v1alpha1.GPUPhase
		reason, msg    string
		wantInTheCause string
	}{
		"in use":   {v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it", "blocked by a device in use (claim ns/c holds it)"},
		"invalid":  {v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidLayout, "no such placement", "refused by the agent, " + v1alpha1.ReasonInvalidLayout + " (no such placement)"},
		"GPU gone": {v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, "not counted", "refused by the agent, " + v1alpha1.ReasonGPUMissing + " (not counted)"},
	} {
		t.Run(name, func(t *testing.T) {
			nml := nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "serves")).
				status(a100(0).layout("7g.80gb@0").phase(tc.phase, tc.reason, tc.msg)).build()
			c, ok := cancelOf(nml, 0)
			if !ok {
				t.Fatal("no cancel of n1/gpu-0's blocked change, want one")
			}
			if !strings.Contains(c.Reason, tc.wantInTheCause) {
				t.Errorf("cancel reason %q, want it to contain %q", c.Reason, tc.wantInTheCause)
			}
		})
	}
}
