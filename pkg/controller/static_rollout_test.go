package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStaticEdgesKeepUnreadable: under maxNodesChanging, a GPU NVML cannot
// read (or does not count) keeps the spec its node has, wherever it is in
// the spec (the first GPU included), while every other GPU gets its new
// layout once, in index order.
func TestStaticEdgesKeepUnreadable(t *testing.T) {
	unreadable := func(i int32) *gpuBuilder {
		return a100(i).layout(wholeLayout).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "fell off the bus")
	}
	desired := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "new"), specGPU(1, halvesLayout, "new")}
	tests := map[string]struct {
		existing *v1alpha1.NodeMigLayout
		want     []v1alpha1.GPUSpec
	}{
		"first GPU unreadable": {
			existing: nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "old"), specGPU(1, wholeLayout, "old")).
				status(unreadable(0), a100(1).layout(wholeLayout)).build(),
			want: []v1alpha1.GPUSpec{specGPU(0, wholeLayout, "old"), specGPU(1, halvesLayout, "new")},
		},
		"second GPU unreadable": {
			existing: nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "old"), specGPU(1, wholeLayout, "old")).
				status(a100(0).layout(wholeLayout), unreadable(1)).build(),
			want: []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "new"), specGPU(1, wholeLayout, "old")},
		},
		"every GPU read": {
			existing: nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "old"), specGPU(1, wholeLayout, "old")).
				status(a100(0).layout(wholeLayout), a100(1).layout(wholeLayout)).build(),
			want: desired,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, keepUnreadable(tc.existing, desired)); diff != "" {
				t.Errorf("spec GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStaticEdgesSlotNameSkipsHardwareGone: a node holding a slot is named
// with the GPU that stalls it where one is Blocked or Failed for a reason a
// change can mend; a GPU NVML cannot read does not stall a rollout (it holds
// no slot), so a node changing beside it is named alone.
func TestStaticEdgesSlotNameSkipsHardwareGone(t *testing.T) {
	tests := map[string]struct {
		nml  *v1alpha1.NodeMigLayout
		want string
	}{
		"unreadable GPU beside one pending": {
			nml: nodeMigLayout("n1").status(
				a100(0).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "fell off the bus"),
				a100(1).phase(v1alpha1.PhasePending, "", "")).build(),
			want: "n1",
		},
		"missing GPU beside one blocked": {
			nml: nodeMigLayout("n1").status(
				a100(0).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, "not counted"),
				a100(1).phase(v1alpha1.PhaseBlocked, "DeviceInUse", "in use")).build(),
			want: "n1 (gpu 1 Blocked, DeviceInUse)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, slotName(tc.nml)); diff != "" {
				t.Errorf("slot name (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStaticEdgesHoldRow: a held node's row is Pending where it had no
// phase yet, and its message starts with why it waits and keeps what it
// said before.
func TestStaticEdgesHoldRow(t *testing.T) {
	g := &rolloutGate{max: 1, changing: 1, slots: []string{"n0"}, held: map[string]bool{"n1": true}}
	got := g.hold(NodeState{Row: v1alpha1.NodeRow{Node: "n1", Message: "agent has not reported yet"}})
	if got.Row.Phase != v1alpha1.PhasePending {
		t.Errorf("held node's phase %q, want %q", got.Row.Phase, v1alpha1.PhasePending)
	}
	if !strings.HasPrefix(got.Row.Message, "waits its turn") || !strings.HasSuffix(got.Row.Message, "; agent has not reported yet") {
		t.Errorf("held node's message %q, want the wait first and the earlier message after it", got.Row.Message)
	}
}

// TestStaticEdgesSameLayoutsIndex: the same layout asked of another GPU is
// another layout for the node.
func TestStaticEdgesSameLayoutsIndex(t *testing.T) {
	if sameLayouts([]v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}, []v1alpha1.GPUSpec{specGPU(1, halvesLayout, "")}) {
		t.Error("halves on GPU 0 and halves on GPU 1 reported as the same layouts")
	}
}
