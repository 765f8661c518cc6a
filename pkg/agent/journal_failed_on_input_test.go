package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestJournalEntryEndsWhenTheGPUFailsOnInput: work left in flight by an
// earlier agent (a create it never began, no MIG mode set) ends once the
// spec asks for a layout the GPU refuses (InvalidLayout): the journal no
// longer holds the GPU's entry, so no later pass takes a device the entry
// names for the agent's own half-made step.
func TestJournalEntryEndsWhenTheGPUFailsOnInput(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepCreating,
		Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Fatalf("GPU 0 %+v, want InvalidLayout", r)
	}
	if got := g.r.Journal.Entries(); len(got) != 0 {
		t.Errorf("journal %+v after the GPU failed on its input, want no entry", got)
	}
}

// TestJournalEntryOfAGPUFailedOnInputThatCannotBeEndedIsRetried: as
// TestJournalEntryEndsWhenTheGPUFailsOnInput, with the journal unwritable:
// the entry stays as it was, and the pass asks for a retry (a GPU failed on
// its input alone would not), so that a pass soon ends it.
func TestJournalEntryOfAGPUFailedOnInputThatCannotBeEndedIsRetried(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepCreating,
		Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	unwritableJournal(t, g)
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Fatalf("GPU 0 %+v, want InvalidLayout", r)
	}
	if !res.Retry {
		t.Error("no retry asked for, with the GPU's journal entry left as it was")
	}
	if got := g.r.Journal.Entries(); len(got) != 1 {
		t.Errorf("journal %+v, want the entry kept as it was", got)
	}
}
