package agent

import (
	"testing"

	"k8s.io/utils/ptr"
)

// TestUndoEnableLeavesAGPUWithInstances: NVML refuses the spec's layout on
// a GPU the agent turned MIG mode on for, but the GPU holds a GPU instance
// now: MIG mode is left on, the GPU not touched, and nothing is added to
// its message.
func TestUndoEnableLeavesAGPUWithInstances(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	obs, unreadable, err := g.r.observe(t.Context())
	if err != nil || len(unreadable) > 0 {
		t.Fatal(err, unreadable)
	}
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: obs[0].GPU.UUID, Step: StepSettingMIGMode, ModeSet: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	if got := g.r.undoEnableForRefused(t.Context(), obs, 0); got != "" {
		t.Errorf("message added %q, want none", got)
	}
	if len(g.locks.begun) != 0 {
		t.Errorf("GPUs locked for a change: %v, want none", g.locks.begun)
	}
	g.wantLayouts(t, "3g.40gb@0")
}
