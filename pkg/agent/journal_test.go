package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestJournalWriteFailureKeepsMemory: a Record or Clear whose write fails
// leaves the journal as its file is, so what the agent acts on and what a
// restart reads agree.
func TestJournalWriteFailureKeepsMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "journal.json")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	first := JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "7g.80gb@0"}
	if err := j.Record(first); err != nil {
		t.Fatal(err)
	}
	want := j.Entries()
	// The journal's directory becomes a file: every write fails.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := j.Record(JournalEntry{GPU: 1, UUID: "GPU-1", Step: StepDraining}); err == nil {
		t.Fatal("Record succeeded without a directory to write to")
	}
	if err := j.Clear(0); err == nil {
		t.Fatal("Clear succeeded without a directory to write to")
	}
	if diff := cmp.Diff(want, j.Entries(), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("entries after failed writes (-want +got):\n%s", diff)
	}
}

// TestOpenJournalRemovesInterruptedWrites: temporary files a killed agent
// left before renaming are removed when the journal is opened.
func TestOpenJournalRemovesInterruptedWrites(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".journal-123")
	if err := os.WriteFile(stale, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenJournal(filepath.Join(dir, "journal.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", stale, err)
	}
}
