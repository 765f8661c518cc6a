package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEvaluateNodeEdges: node states the main table leaves out.
func TestEvaluateNodeEdges(t *testing.T) {
	reported := func(n *v1alpha1.NodeMigLayout) *v1alpha1.NodeMigLayout {
		n.Status.ObservedGeneration = 1
		return n
	}
	tests := map[string]struct {
		nml      *v1alpha1.NodeMigLayout
		problems []Problem
		agent    AgentHealth
		want     NodeState
	}{
		// The agent wrote its status without GPUs while the spec names one:
		// not a node without GPUs, the GPU is awaited.
		"the agent reports no GPU but the spec names one": {
			nml: reported(nodeMigLayout("n").spec(specGPU(0, wholeLayout, "")).build()),
			want: NodeState{Reporting: true, Progressing: true, Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhasePending, Message: "gpu 0: not reported by the agent",
				GPUs: []v1alpha1.GPURow{{Index: 0, Desired: wholeLayout, Phase: v1alpha1.PhasePending}},
			}},
		},
		// A rule that failed on the node is told even where the agent
		// lists no GPU now.
		"a rule failed while the agent reports no GPU": {
			nml:      reported(nodeMigLayout("n").build()),
			problems: []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: no"}},
			want: NodeState{Reporting: true, Failed: true,
				Problems: []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: no"}},
				Row: v1alpha1.NodeRow{
					Node: "n", Phase: v1alpha1.PhaseFailed, Message: "InvalidLayout: gpu 0: no",
					GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Phase: v1alpha1.PhaseFailed}},
				}},
		},
		// A layout the controller cannot parse is held where the agent
		// reports the very same text.
		"a layout that does not parse, held as written": {
			nml: nodeMigLayout("n").spec(specGPU(0, "future-layout", "")).status(a100(0).layout("future-layout")).build(),
			want: NodeState{Reporting: true, Ready: true, Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseReady, GPUs: []v1alpha1.GPURow{
				{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "future-layout", Actual: "future-layout", Phase: v1alpha1.PhaseReady},
			}}},
		},
		// A GPU Blocked with neither reason nor message is told by its
		// phase alone.
		"blocked without reason or message": {
			nml: nodeMigLayout("n").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, "", "")).build(),
			want: NodeState{Reporting: true, Failed: true,
				Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseBlocked}},
				Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseBlocked, Message: "gpu 0: Blocked", GPUs: []v1alpha1.GPURow{
					{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: halvesLayout, Actual: wholeLayout, Phase: v1alpha1.PhaseBlocked},
				}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := EvaluateNode("n", tc.nml, tc.problems, tc.agent)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("node state (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRowMessagesAreBounded: a node's row message stays within the bound
// however long what it tells: a lost agent's note with the last report,
// a conflict's reason, a write refusal.
func TestRowMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("x", 2*maxRowMessage)
	draining := nodeMigLayout("n").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, "", "")).build()
	for name, st := range map[string]NodeState{
		"a lost agent":    EvaluateNode("n", draining, nil, AgentHealth{Lost: true, Message: long}),
		"a conflict":      ConflictNode("n", long),
		"a write refused": withWriteError(EvaluateNode("n", draining, nil, AgentHealth{}), errors.New(long)),
		"a GPU's long message": EvaluateNode("n", nodeMigLayout("n").spec(specGPU(0, halvesLayout, "")).
			status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, long)).build(), nil, AgentHealth{}),
	} {
		t.Run(name, func(t *testing.T) {
			if len(st.Row.Message) > maxRowMessage {
				t.Errorf("row message of %d bytes, want at most %d", len(st.Row.Message), maxRowMessage)
			}
			if !strings.HasSuffix(st.Row.Message, "...") {
				t.Errorf("row message %q... cut without an ellipsis", st.Row.Message[:40])
			}
		})
	}
}

// TestNodeRowCapEdges: a row of exactly sixteen GPUs is listed whole with
// no note; a longer one keeps the reported GPUs first, yet lists the rows
// it keeps in index order.
func TestNodeRowCapEdges(t *testing.T) {
	build := func(reported, unreported []int32) *v1alpha1.NodeMigLayout {
		var gpus []*gpuBuilder
		var specs []v1alpha1.GPUSpec
		for _, i := range reported {
			gpus = append(gpus, a100(i).layout(wholeLayout))
			specs = append(specs, specGPU(i, wholeLayout, ""))
		}
		for _, i := range unreported {
			specs = append(specs, specGPU(i, wholeLayout, ""))
		}
		return nodeMigLayout("n1").status(gpus...).spec(specs...).build()
	}
	span := func(from, to int32) []int32 {
		var out []int32
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := map[string]struct {
		nml         *v1alpha1.NodeMigLayout
		wantIndices []int32
		wantNote    bool
	}{
		"sixteen GPUs, all listed": {
			nml:         build(span(0, 16), nil),
			wantIndices: span(0, 16),
		},
		"eighteen GPUs, the ten reported last by index": {
			nml:         build(span(8, 18), span(0, 8)),
			wantIndices: append(span(0, 6), span(8, 18)...),
			wantNote:    true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := evaluateReport("n1", tc.nml, nil)
			var got []int32
			for _, r := range st.Row.GPUs {
				got = append(got, r.Index)
			}
			if diff := cmp.Diff(tc.wantIndices, got); diff != "" {
				t.Errorf("GPU rows (-want +got):\n%s", diff)
			}
			if note := strings.Contains(st.Row.Message, "more GPU rows not listed"); note != tc.wantNote {
				t.Errorf("row message %q: note of rows left out %t, want %t", st.Row.Message, note, tc.wantNote)
			}
		})
	}
}

// TestUntouchedGPURowOfANodeWithOneGPU: the one GPU of a node that no spec
// lists is in its row, as it is.
func TestUntouchedGPURowOfANodeWithOneGPU(t *testing.T) {
	nml := nodeMigLayout("n1").status(a100(0).layout(wholeLayout)).build()
	st := withUntouchedGPUs(EvaluateNode("n1", nml, nil, AgentHealth{}), nml)
	want := []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: wholeLayout, Actual: wholeLayout, Phase: v1alpha1.PhaseReady}}
	if diff := cmp.Diff(want, st.Row.GPUs); diff != "" {
		t.Errorf("GPU rows (-want +got):\n%s", diff)
	}
}

// TestWriteRefusalKeepsLostNodeUnknown: a node whose agent is lost stays
// in phase Unknown when its NodeMigLayout could not be written either;
// the refusal leads its message.
func TestWriteRefusalKeepsLostNodeUnknown(t *testing.T) {
	nml := nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build()
	st := withWriteError(EvaluateNode("n1", nml, nil, AgentHealth{Lost: true, Message: "no heartbeat"}), errors.New("denied by policy"))
	got := condition{Status: string(st.Row.Phase), Message: st.Row.Message}
	want := condition{Status: string(v1alpha1.PhaseUnknown), Message: msgWriteFailed + ": denied by policy; no heartbeat"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row phase and message (-want +got):\n%s", diff)
	}
}

// TestHeldNodeWithLostAgentIsNotOnTheWay: a node whose agent is lost,
// held back by spec.maxNodesChanging, counts as lost: it is not named on
// the way to the desired layout.
func TestHeldNodeWithLostAgentIsNotOnTheWay(t *testing.T) {
	nml := nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(wholeLayout)).build()
	gate := &rolloutGate{max: 1, lost: map[string]string{"n1": lostNote}}
	st := gate.hold(EvaluateNode("n1", nml, nil, AgentHealth{Lost: true, Message: "no heartbeat"}))
	got := map[string]condition{}
	for _, c := range conditionsOf(Conditions(Observation{Generation: 1, Nodes: []NodeState{st, readyNode("n2")}})) {
		got[c.Type] = c
	}
	want := map[string]condition{
		v1alpha1.ConditionReady:       {"Ready", "False", v1alpha1.ReasonAgentLost, "1 of 2 nodes is not ready: 1 with a lost agent"},
		v1alpha1.ConditionProgressing: {"Progressing", "False", v1alpha1.ReasonStable, "no node is changing"},
	}
	for typ, c := range want {
		if diff := cmp.Diff(c, got[typ]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", typ, diff)
		}
	}
}

// TestTruncate: a string of exactly the bound is kept whole, one past it
// is cut to the bound with an ellipsis.
func TestTruncate(t *testing.T) {
	tests := map[string]struct {
		s    string
		n    int
		want string
	}{
		"exactly the bound":  {s: "abcdefghij", n: 10, want: "abcdefghij"},
		"one past the bound": {s: "abcdefghijk", n: 10, want: "abcdefg..."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, truncate(tc.s, tc.n)); diff != "" {
				t.Errorf("truncate(%q, %d) (-want +got):\n%s", tc.s, tc.n, diff)
			}
		})
	}
}
