package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestFailingPassesForgetFailedGPU: a GPU whose passes fail and that is
// then reported Failed is forgotten: failing again, it counts from then.
func TestFailingPassesForgetFailedGPU(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	report := func(row *gpuBuilder) *v1alpha1.NodeMigLayout {
		return nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(row).build()
	}
	failed := a100(0).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "publishing the drain: forbidden")
	var f failingPasses
	f.observe("a", "n", report(failed), t0)
	if got := f.observe("a", "n", report(a100(0).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, "gone")), t0.Add(time.Minute)); got != nil {
		t.Errorf("reported Failed: %v, want nothing failing", got)
	}
	got := f.observe("a", "n", report(failed), t0.Add(2*time.Minute))
	want := map[int32]failingGPU{0: {since: t0.Add(2 * time.Minute), last: "publishing the drain: forbidden"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(failingGPU{})); diff != "" {
		t.Errorf("failing again after Failed (-want +got):\n%s", diff)
	}
}

// TestWithFailingPassesMessage: a stuck GPU's message gives the last
// failure only when one is known, says what a GPU now Pending for another
// reason does, and is cut to a row message's length.
func TestWithFailingPassesMessage(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	since := now.Add(-time.Hour)
	sinceText := since.UTC().Format(time.RFC3339)
	long := strings.Repeat("x", 2*maxRowMessage)
	for name, tc := range map[string]struct {
		row  *gpuBuilder
		last string
		want string // the whole message; "": checked by length
	}{
		"no failure message known": {row: a100(0).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, ""),
			want: "the agent's passes failing since " + sinceText},
		"a new spec pending": {row: a100(0).phase(v1alpha1.PhasePending, v1alpha1.ReasonPending, "a new spec"), last: "forbidden",
			want: "the agent's passes failing since " + sinceText + "; the last: forbidden; now Pending (Pending)"},
		"a long failure message": {row: a100(0).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, long), last: long},
	} {
		t.Run(name, func(t *testing.T) {
			nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(tc.row).build()
			st := EvaluateNode("n", nml, nil, AgentHealth{})
			st, _ = withFailingPasses(st, nml, map[int32]failingGPU{0: {since: since, last: tc.last}}, now)
			if len(st.Stuck) != 1 {
				t.Fatalf("stuck GPUs %+v, want GPU 0", st.Stuck)
			}
			msg := st.Stuck[0].Message
			if tc.want != "" && msg != tc.want {
				t.Errorf("message %q, want %q", msg, tc.want)
			}
			if len(msg) > maxRowMessage {
				t.Errorf("message of %d bytes, want at most %d", len(msg), maxRowMessage)
			}
		})
	}
}
