package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/renameio/v2"
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
	path := filepath.Join(dir, "journal.json")
	stale := interruptedWrite(t, path)
	aside := path + ".unreadable"
	if err := os.WriteFile(aside, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenJournal(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", stale, err)
	}
	if _, err := os.Stat(aside); err != nil {
		t.Errorf("the journal set aside before is gone: %v", err)
	}
}

// interruptedWrite leaves the temporary file a write of path by
// renameio leaves when it is killed before the rename, and returns its
// path.
func interruptedWrite(t *testing.T, path string) string {
	t.Helper()
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	if err := f.File.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// TestOpenJournalSetsAsideOtherVersions: a journal of another version (an
// agent rolled back from a newer one) or not JSON is moved to .unreadable,
// the journal starts empty, and SetAside says so and why; a journal of this
// version is read and SetAside is nil.
func TestOpenJournalSetsAsideOtherVersions(t *testing.T) {
	tests := map[string]struct {
		data string
		want string // in SetAside's error; "" for none
	}{
		"this version":    {data: fmt.Sprintf(`{"version":%d,"entries":[{"gpu":0,"step":"Creating"}]}`, JournalVersion)},
		"a newer version": {data: fmt.Sprintf(`{"version":%d,"entries":[]}`, JournalVersion+1), want: fmt.Sprintf("version %d, this agent reads version %d", JournalVersion+1, JournalVersion)},
		"not JSON":        {data: "{", want: "unexpected end of JSON input"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			got := j.SetAside()
			if tc.want == "" {
				if got != nil || len(j.Entries()) != 1 {
					t.Errorf("SetAside %v, %d entries; want nil and the one entry", got, len(j.Entries()))
				}
				return
			}
			if got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Errorf("SetAside %v, want an error saying %q", got, tc.want)
			}
			if _, err := os.Stat(path + ".unreadable"); err != nil {
				t.Errorf("the file was not set aside: %v", err)
			}
			if len(j.Entries()) != 0 {
				t.Errorf("%d entries, want an empty journal", len(j.Entries()))
			}
		})
	}
}

// TestJournalKeepsEmptied: Record carries the record that the work
// destroyed devices of the GPU (Emptied) to the GPU's later entries of the
// same UUID, and KeepMode keeps it, in an entry whose step does not make a
// pending mode change the agent's (cancelOrphanModes).
func TestJournalKeepsEmptied(t *testing.T) {
	on := true
	destroying := JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDestroying, Desired: "3g.40gb@4", Destroy: []string{"7g.80gb@0"}}
	tests := map[string]struct {
		first, then JournalEntry
		keepMode    bool
		want        []JournalEntry // Started and Updated not compared
	}{
		"a retry of the same work": {
			first: destroying,
			then:  JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepCreating, Desired: "3g.40gb@4", Create: []string{"3g.40gb@4"}},
			want:  []JournalEntry{{GPU: 0, UUID: "GPU-0", Step: StepCreating, Desired: "3g.40gb@4", Create: []string{"3g.40gb@4"}, Emptied: true}},
		},
		"another GPU at the index": {
			first: destroying,
			then:  JournalEntry{GPU: 0, UUID: "GPU-9", Step: StepDraining, Desired: "3g.40gb@4"},
			want:  []JournalEntry{{GPU: 0, UUID: "GPU-9", Step: StepDraining, Desired: "3g.40gb@4"}},
		},
		"draining only": {
			first: JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4", Destroy: []string{"7g.80gb@0"}},
			then:  JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "1g.10gb@6", Destroy: []string{"7g.80gb@0"}},
			want:  []JournalEntry{{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "1g.10gb@6", Destroy: []string{"7g.80gb@0"}}},
		},
		"kept without a mode set": {
			first:    destroying,
			then:     JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4"},
			keepMode: true,
			want:     []JournalEntry{{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4", Emptied: true}},
		},
		"kept with a mode set": {
			first:    JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDestroying, Desired: "3g.40gb@4", Destroy: []string{"7g.80gb@0"}, ModeSet: &on},
			then:     JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4"},
			keepMode: true,
			want:     []JournalEntry{{GPU: 0, UUID: "GPU-0", Step: StepSettingMIGMode, Desired: "3g.40gb@4", ModeSet: &on, Emptied: true}},
		},
		"nothing destroyed is not kept": {
			first:    JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4", Destroy: []string{"7g.80gb@0"}},
			then:     JournalEntry{GPU: 0, UUID: "GPU-0", Step: StepDraining, Desired: "3g.40gb@4", Destroy: []string{"7g.80gb@0"}},
			keepMode: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j, err := OpenJournal(filepath.Join(t.TempDir(), "journal.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []JournalEntry{tc.first, tc.then} {
				if err := j.Record(e); err != nil {
					t.Fatal(err)
				}
			}
			if tc.keepMode {
				if err := j.KeepMode(0); err != nil {
					t.Fatal(err)
				}
			}
			// What a restarted agent reads back.
			again, err := OpenJournal(j.path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, again.Entries(), cmpopts.IgnoreFields(JournalEntry{}, "Started", "Updated"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}
