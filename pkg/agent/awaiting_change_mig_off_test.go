package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAwaitingChangeIgnoresTheLayoutOfAMIGOffSpec: a GPU whose spec asks
// for MIG mode off, and whose row shows it off and Ready, awaits no change
// whatever layout text the spec still carries (the agent ignores it with
// MIG off), so a failed pass does not mark it PassFailed.
func TestAwaitingChangeIgnoresTheLayoutOfAMIGOffSpec(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: false, Layout: "3g.40gb@0"},
			{Index: 1, MIGEnabled: false},
			{Index: 2, MIGEnabled: true, Layout: "7g.80gb@0"},
		}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied},
			{Index: 1, Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied},
			{Index: 2, Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied},
		}},
	}
	if diff := cmp.Diff([]int{2}, awaitingChange(nml)); diff != "" {
		t.Errorf("GPUs awaiting a change (-want +got):\n%s", diff)
	}
}
