package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStaticEdgesPendingReasonWithoutMessage: a Pending GPU's reason is
// added to the row's message only with the agent's message for it; a
// reason alone adds nothing.
func TestStaticEdgesPendingReasonWithoutMessage(t *testing.T) {
	nml := nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "")).build()
	st := EvaluateNode("n1", nml, nil, AgentHealth{})
	want := `gpu 0: Pending: actual "7g.80gb@0", desired "3g.40gb@0,3g.40gb@4"`
	if diff := cmp.Diff(want, st.Row.Message); diff != "" {
		t.Errorf("row message (-want +got):\n%s", diff)
	}
}

// TestStaticEdgesDroppedGPUWithProblemOneRow: a GPU the spec no longer
// lists because its rule failed on it, shown draining still, has one row:
// the failed one of its problem.
func TestStaticEdgesDroppedGPUWithProblemOneRow(t *testing.T) {
	nml := nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(halvesLayout), a100(1).layout(wholeLayout).phase(v1alpha1.PhaseDraining, "", "")).build()
	problems := []Problem{{GPU: 1, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 (NVIDIA A100-SXM4-80GB), rule \"halves\": does not fit"}}
	st := EvaluateNode("n1", nml, problems, AgentHealth{})
	var got []string
	for _, r := range st.Row.GPUs {
		got = append(got, string(r.Phase))
	}
	if diff := cmp.Diff([]string{string(v1alpha1.PhaseReady), string(v1alpha1.PhaseFailed)}, got); diff != "" {
		t.Errorf("GPU row phases (-want +got):\n%s", diff)
	}
}

// TestStaticEdgesWriteErrorBeforeFirstReport: a node whose NodeMigLayout
// could not be written before its agent ever reported says so alone: the
// "not reported yet" note, which only follows from the failed write, is
// dropped.
func TestStaticEdgesWriteErrorBeforeFirstReport(t *testing.T) {
	st := withWriteError(EvaluateNode("n1", nil, nil, AgentHealth{}), errors.New("denied by policy"))
	want := msgWriteFailed + ": denied by policy"
	if diff := cmp.Diff(want, st.Row.Message); diff != "" {
		t.Errorf("row message (-want +got):\n%s", diff)
	}
	if strings.Contains(st.Row.Message, msgNoReport) {
		t.Errorf("row message %q names the missing report", st.Row.Message)
	}
}
