package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestJournalEntryThatCannotBeClearedIsRetried: a GPU found on its layout
// still has the journal entry of work that is done, and the journal cannot
// be written: the GPU is Ready, its entry stays, and the pass asks for a
// retry so that a pass soon clears it (not only the next resync).
func TestJournalEntryThatCannotBeClearedIsRetried(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepCreating,
		Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@4"}, Done: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	unwritableJournal(t, g)
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", got)
	}
	if !res.Retry {
		t.Error("no retry asked for, with the GPU's journal entry left uncleared")
	}
	if got := g.r.Journal.Entries(); len(got) != 1 {
		t.Errorf("journal %+v, want the entry kept as it was", got)
	}
}
