package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDegradedReason: the Degraded condition names the most pressing
// problem: a lost agent before a GPU NVML cannot read, a rule that cannot
// be followed before a GPU of an unknown model, a device in use before a
// GPU waiting for a reset; reasons outside that order in alphabetical
// order. A GPU the agent reports Blocked or Failed counts under the agent's
// reason where it is a valid condition reason, else as a device in use
// (Blocked) or an NVML error (Failed).
func TestDegradedReason(t *testing.T) {
	stuck := func(name string, gpus ...StuckGPU) NodeState {
		return NodeState{Row: v1alpha1.NodeRow{Node: name, Phase: gpus[0].Phase}, Failed: true, Reporting: true, Stuck: gpus}
	}
	tests := map[string]struct {
		nodes []NodeState
		want  string
	}{
		"a lost agent before a GPU NVML cannot read": {
			nodes: []NodeState{
				stuck("n1", StuckGPU{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable}),
				lostNode("n2"),
			},
			want: v1alpha1.ReasonAgentLost,
		},
		"a rule that cannot be followed before a GPU of an unknown model": {
			nodes: []NodeState{{
				Row: v1alpha1.NodeRow{Node: "n1", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
				Problems: []Problem{
					{GPU: 0, Reason: v1alpha1.ReasonUnknownGPU, Message: "gpu 0 (Tesla T4): unknown model"},
					{GPU: 1, Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 (A100): does not fit"},
				},
			}},
			want: v1alpha1.ReasonInvalidLayout,
		},
		"a device in use before a GPU waiting for a reset": {
			nodes: []NodeState{stuck("n1",
				StuckGPU{GPU: 0, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired},
				StuckGPU{GPU: 1, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse},
			)},
			want: v1alpha1.ReasonDeviceInUse,
		},
		"an unwritable journal before a rule that matches no GPU": {
			nodes: []NodeState{{
				Row: v1alpha1.NodeRow{Node: "n1", Phase: v1alpha1.PhaseFailed}, Failed: true, Reporting: true,
				Stuck:    []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonJournalUnwritable}},
				Problems: []Problem{{GPU: 1, Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: "rule 2 matches no GPU"}},
			}},
			want: v1alpha1.ReasonJournalUnwritable,
		},
		"reasons outside the order: the first alphabetically": {
			nodes: []NodeState{stuck("n1",
				StuckGPU{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: "ZetaError"},
				StuckGPU{GPU: 1, Phase: v1alpha1.PhaseFailed, Reason: "AlphaError"},
				StuckGPU{GPU: 2, Phase: v1alpha1.PhaseFailed, Reason: "MidError"},
			)},
			want: "AlphaError",
		},
		"an agent reason that is no valid condition reason is not used": {
			nodes: []NodeState{stuck("n1", StuckGPU{GPU: 0, Phase: v1alpha1.PhaseFailed, Reason: "not a reason!"})},
			want:  v1alpha1.ReasonNVMLError,
		},
		"blocked without a reason: a device in use": {
			nodes: []NodeState{stuck("n1", StuckGPU{GPU: 0, Phase: v1alpha1.PhaseBlocked})},
			want:  v1alpha1.ReasonDeviceInUse,
		},
		"failed without a reason: an NVML error": {
			nodes: []NodeState{stuck("n1", StuckGPU{GPU: 0, Phase: v1alpha1.PhaseFailed})},
			want:  v1alpha1.ReasonNVMLError,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for _, c := range Conditions(Observation{Generation: 1, Nodes: tc.nodes}) {
				got[c.Type] = c.Reason
			}
			if diff := cmp.Diff(tc.want, got[v1alpha1.ConditionDegraded]); diff != "" {
				t.Errorf("Degraded reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStuckReason: an agent's reason the API server would take is the
// condition's; one it would refuse (empty, spaced, too long) gives way to
// the reason of the GPU's phase.
func TestStuckReason(t *testing.T) {
	long := "R" + strings.Repeat("x", maxConditionReason-1)
	for name, tc := range map[string]struct {
		g    StuckGPU
		want string
	}{
		"the agent's":              {g: StuckGPU{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable}, want: v1alpha1.ReasonGPUUnreadable},
		"with a colon and a comma": {g: StuckGPU{Phase: v1alpha1.PhaseFailed, Reason: "A:B,C_1"}, want: "A:B,C_1"},
		"the longest taken":        {g: StuckGPU{Phase: v1alpha1.PhaseFailed, Reason: long}, want: long},
		"one byte too long":        {g: StuckGPU{Phase: v1alpha1.PhaseFailed, Reason: long + "x"}, want: v1alpha1.ReasonNVMLError},
		"none, blocked":            {g: StuckGPU{Phase: v1alpha1.PhaseBlocked}, want: v1alpha1.ReasonDeviceInUse},
		"none, failed":             {g: StuckGPU{Phase: v1alpha1.PhaseFailed}, want: v1alpha1.ReasonNVMLError},
		"a sentence":               {g: StuckGPU{Phase: v1alpha1.PhaseBlocked, Reason: "device in use"}, want: v1alpha1.ReasonDeviceInUse},
		"ending with a colon":      {g: StuckGPU{Phase: v1alpha1.PhaseFailed, Reason: "Reason:"}, want: v1alpha1.ReasonNVMLError},
	} {
		t.Run(name, func(t *testing.T) {
			if got := stuckReason(tc.g); got != tc.want {
				t.Errorf("stuckReason(%+v) = %q, want %q", tc.g, got, tc.want)
			}
		})
	}
}
