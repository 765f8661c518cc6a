package agent

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestJournalWriteFailureIsNoNVMLError: the agent's state directory
// cannot be written (disk full, read-only mount). A GPU that only gains
// devices (no drain, so the drain's journal write that fails the pass as a
// whole never happens) fails at its first journal write in apply, before
// any NVML call: it is reported Failed/JournalUnwritable, not NVMLError, and
// miglayout_agent_nvml_errors_total counts nothing (an operator is sent to
// the disk, not the driver).
func TestJournalWriteFailureIsNoNVMLError(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	// The journal's directory becomes a file: every journal write fails.
	if err := os.RemoveAll(g.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(g.dir) })
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		return // failing the pass as a whole (as the drain's journal write does) is fine
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable {
		t.Errorf("journal write failure reported as %s/%s (%q), want Failed/%s", got.Phase, got.Reason, got.Message, ReasonJournalUnwritable)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.nvmlErrors); n != 0 {
		t.Errorf("miglayout_agent_nvml_errors_total has %d series after a journal write failure, want none (NVML never failed)", n)
	}
}
