package controller

import (
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEvaluateNodeGPURows: a GPU counts as holding its desired layout only
// where the agent reports it Ready with that layout, and a reported layout
// that does not parse holds only the same text; a GPU that NVML cannot read
// has one row: the GPU's own where the spec lists it, the refused one
// where its rule cannot be followed.
func TestEvaluateNodeGPURows(t *testing.T) {
	tests := map[string]struct {
		nml      *v1alpha1.NodeMigLayout
		problems []Problem
		want     []v1alpha1.GPURow
	}{
		"the layout reached while the agent still repartitions": {
			nml: nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
				status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(),
			want: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: halvesLayout, Actual: halvesLayout, Phase: v1alpha1.PhaseRepartitioning}},
		},
		"a reported layout that does not parse": {
			nml: nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
				status(a100(0).layout("1c.3g.40gb@0")).build(),
			want: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: halvesLayout, Actual: "1c.3g.40gb@0", Phase: v1alpha1.PhasePending}},
		},
		"an unreadable GPU in the spec": {
			nml: nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
				status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "NVML cannot read the GPU")).build(),
			want: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: halvesLayout, Actual: "?", Phase: v1alpha1.PhaseFailed}},
		},
		"an unreadable GPU whose rule was refused": {
			nml: nodeMigLayout("n1").
				status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "NVML cannot read the GPU")).build(),
			problems: []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: does not fit"}},
			want:     []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "?", Actual: "?", Phase: v1alpha1.PhaseFailed}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := EvaluateNode("n1", tc.nml, tc.problems, AgentHealth{})
			if diff := cmp.Diff(tc.want, st.Row.GPUs); diff != "" {
				t.Errorf("GPU rows (-want +got):\n%s", diff)
			}
			if st.Ready {
				t.Errorf("node Ready; want not Ready (row %+v)", st.Row)
			}
		})
	}
}

// TestTruncateKeepsUTF8: messages cut to fit a status field stay valid
// UTF-8: a multi-byte character at the cut is dropped whole.
func TestTruncateKeepsUTF8(t *testing.T) {
	tests := map[string]struct {
		s    string
		n    int
		want string
	}{
		"short enough":                {s: "2× A100", n: 16, want: "2× A100"},
		"cut inside a character":      {s: "ab×cdefgh", n: 6, want: "ab..."},
		"cut after a whole character": {s: "a×bcdefgh", n: 6, want: "a×..."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := truncate(tc.s, tc.n)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("truncate(%q, %d) (-want +got):\n%s", tc.s, tc.n, diff)
			}
			if !utf8.ValidString(got) || len(got) > tc.n {
				t.Errorf("truncate(%q, %d) = %q: not valid UTF-8 or longer than %d bytes", tc.s, tc.n, got, tc.n)
			}
		})
	}
}
