package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRolloutGateAdmit: with maxNodesChanging 1, a node gets a new layout
// only while no other node of the MigLayout is changing. A node changing
// already takes a new target without a turn of its own (its turn is the one
// it holds); a node that has not reached its spec counts as changing until
// every GPU of it holds its layout and is Ready, whatever its layout; and
// turning MIG on with no device is a change from MIG off.
func TestRolloutGateAdmit(t *testing.T) {
	halves := specGPU(0, halvesLayout, "")
	whole := specGPU(0, wholeLayout, "")
	tests := map[string]struct {
		// nodes are the selected nodes' NodeMigLayouts; the first is the
		// one asked to take gpus.
		nodes []*v1alpha1.NodeMigLayout
		gpus  []v1alpha1.GPUSpec
		want  bool
	}{
		"a node changing takes a new target while it holds the only turn": {
			nodes: []*v1alpha1.NodeMigLayout{
				nodeMigLayout("n1").spec(halves).status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(),
				nodeMigLayout("n2").spec(whole).status(a100(0).layout(wholeLayout)).build(),
			},
			gpus: []v1alpha1.GPUSpec{specGPU(0, "4g.40gb@0", "")},
			want: true,
		},
		"a node whose GPU holds its layout but failed counts as changing": {
			nodes: []*v1alpha1.NodeMigLayout{
				nodeMigLayout("n2").spec(whole).status(a100(0).layout(wholeLayout)).build(),
				nodeMigLayout("n1").spec(whole).status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "reading the GPU")).build(),
			},
			gpus: []v1alpha1.GPUSpec{halves},
			want: false,
		},
		"MIG on with no device after MIG off is a change": {
			nodes: []*v1alpha1.NodeMigLayout{
				nodeMigLayout("n2").spec(specMIGOff(0, "")).status(a100(0).migOff()).build(),
				nodeMigLayout("n1").spec(halves).status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(),
			},
			gpus: []v1alpha1.GPUSpec{specGPU(0, "", "")},
			want: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.MaxNodesChanging = ptr.To[int32](1)
			g := newRolloutGate(ml, tc.nodes, nil, nil)
			if diff := cmp.Diff(tc.want, g.admit(tc.nodes[0], tc.gpus)); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRolloutGateHoldFailedNode: a node held back for its turn is not
// Ready; it is Progressing unless a GPU of it failed (a rule it cannot
// follow), which the Degraded condition reports instead.
func TestRolloutGateHoldFailedNode(t *testing.T) {
	tests := map[string]struct {
		st              NodeState
		wantProgressing bool
	}{
		"waiting": {
			st:              NodeState{Row: v1alpha1.NodeRow{Node: "n1", Phase: v1alpha1.PhaseReady}, Ready: true, Reporting: true},
			wantProgressing: true,
		},
		"failed": {
			st:              invalidNode("n1"),
			wantProgressing: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := &rolloutGate{max: 1, changing: 1, held: map[string]bool{"n1": true}}
			got := g.hold(tc.st)
			if got.Ready || got.Progressing != tc.wantProgressing {
				t.Errorf("held node Ready %v, Progressing %v; want not Ready, Progressing %v", got.Ready, got.Progressing, tc.wantProgressing)
			}
		})
	}
}
