package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/miglayout/miglayout/pkg/fsyncdir"
)

// JournalVersion is the on-disk format version of the journal. A journal of
// another version is set aside (renamed with a .unreadable suffix) and the
// agent converges from NVML truth alone.
const JournalVersion = 1

// Step names what the agent was doing to a GPU.
type Step string

const (
	// StepDraining: the devices in Destroy are published tainted; nothing
	// was changed on the GPU yet.
	StepDraining Step = "Draining"
	// StepDestroying: destroying Destroy[len(Done)] (CI then GI).
	StepDestroying Step = "Destroying"
	// StepCreating: creating Create[...] (GI then CI); a GI without its CI
	// found after a crash here is rolled back.
	StepCreating Step = "Creating"
	// StepSettingMIGMode: changing MIG mode (ModeSet), or, for an entry
	// KeepMode left, a mode change NVML may still hold pending.
	StepSettingMIGMode Step = "SettingMIGMode"
)

// JournalEntry is the record of the work in flight on one GPU.
type JournalEntry struct {
	GPU     int       `json:"gpu"`
	UUID    string    `json:"uuid"`
	Step    Step      `json:"step"`
	Desired string    `json:"desired"`
	Destroy []string  `json:"destroy,omitempty"`
	Create  []string  `json:"create,omitempty"`
	Done    []string  `json:"done,omitempty"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// ModeSet is the MIG mode the agent last asked NVML for on this GPU
	// (true: enabled). NVML may hold the change pending until the GPU is
	// reset (Ampere), so it outlives the step that made it: Record carries
	// it over to the GPU's later entries, and a pass that stops before its
	// NVML work keeps it (KeepMode). A pending change that no spec asks for
	// any more is the agent's to cancel. Nil in entries of journals written
	// before the field, and where no mode was set.
	ModeSet *bool `json:"modeSet,omitempty"`
	// Emptied records that the work in flight destroyed, or began to
	// destroy, devices of this GPU (the GPU's Destroy list with its step
	// Destroying, or some of it Done). A later pass's entry for the same
	// work lists only what is left to do, so Record carries the field over
	// to the GPU's later entries (same UUID), and KeepMode keeps it: a GPU
	// whose work emptied it and was then no longer asked for is the
	// agent's to turn MIG mode off on (turnOffEmptied), however many
	// retries came between. False in entries of journals written before
	// the field: destroysBegun then reads the entry's own lists.
	Emptied bool `json:"emptied,omitempty"`
}

// destroysBegun reports whether the work in flight destroyed, or began to
// destroy, devices of the GPU: Emptied, or, for the entry's own lists, its
// step Destroying or some destroy done.
func (e JournalEntry) destroysBegun() bool {
	return e.Emptied || len(e.Destroy) > 0 && (e.Step == StepDestroying || len(e.Done) > 0)
}

// inFlight is the device the entry's step was working on: Destroy[len(Done)]
// while destroying, the first Create not done while creating (Done lists the
// destroys, then the creates, finished). Devices before it are finished,
// devices after it untouched.
func (e JournalEntry) inFlight() (string, bool) {
	switch e.Step {
	case StepDestroying:
		if len(e.Done) < len(e.Destroy) {
			return e.Destroy[len(e.Done)], true
		}
	case StepCreating:
		if i := len(e.Done) - len(e.Destroy); i >= 0 && i < len(e.Create) {
			return e.Create[i], true
		}
	}
	return "", false
}

type journalFile struct {
	Version int            `json:"version"`
	Entries []JournalEntry `json:"entries"`
}

// Journal is the agent's crash-safe record of work in flight, one entry per
// GPU, kept in one JSON file that is replaced atomically (write to a
// temporary file, fsync, rename) on every change.
type Journal struct {
	path    string
	mu      sync.Mutex
	entries map[int]JournalEntry
	now     func() time.Time
	// setAside says why the file found at open was set aside; nil if none.
	setAside error
}

// SetAside reports the journal file OpenJournal found but could not use
// (not JSON, or another version: an agent rolled back from a newer one) and
// moved to <path>.unreadable, starting empty; nil if none. The work it
// recorded (a pending MIG mode the agent set, GPU instances being created)
// is not resumed: the caller should say so loudly.
func (j *Journal) SetAside() error { return j.setAside }

// OpenJournal reads the journal at path, or starts an empty one.
func OpenJournal(path string) (*Journal, error) {
	j := &Journal{path: path, entries: map[int]JournalEntry{}, now: time.Now}
	// Temporary files of writes a kill interrupted before the rename.
	if tmps, err := filepath.Glob(journalTemps(path)); err == nil {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading journal %s: %w", path, err)
	}
	var f journalFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != JournalVersion {
		bad := path + ".unreadable"
		if rerr := os.Rename(path, bad); rerr != nil {
			return nil, fmt.Errorf("setting aside unreadable journal %s: %w", path, rerr)
		}
		why := fmt.Sprintf("version %d, this agent reads version %d", f.Version, JournalVersion)
		if err != nil {
			why = err.Error()
		}
		j.setAside = fmt.Errorf("journal %s set aside as %s (%s): the work it recorded is not resumed", path, bad, why)
		return j, nil
	}
	for _, e := range f.Entries {
		j.entries[e.GPU] = e
	}
	return j, nil
}

// Entries returns the entries in GPU order.
func (j *Journal) Entries() []JournalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]JournalEntry, 0, len(j.entries))
	for _, e := range j.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].GPU < out[b].GPU })
	return out
}

// Record writes e as the GPU's entry, keeping Started from an existing
// entry, its ModeSet where e has none and the GPU is the same (UUID), and
// its Emptied where the GPU is the same; e's Emptied is set where its own
// lists show destroys begun.
func (j *Journal) Record(e JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	old, ok := j.entries[e.GPU]
	if ok && !old.Started.IsZero() {
		e.Started = old.Started
	} else {
		e.Started = now
	}
	if ok && e.ModeSet == nil && old.UUID == e.UUID {
		e.ModeSet = old.ModeSet
	}
	e.Emptied = e.destroysBegun() || ok && old.UUID == e.UUID && old.destroysBegun()
	e.Updated = now
	next := maps.Clone(j.entries)
	next[e.GPU] = e
	return j.flush(next)
}

// Clear removes the GPU's entry: its work is finished.
func (j *Journal) Clear(gpuIndex int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[gpuIndex]; !ok {
		return nil
	}
	next := maps.Clone(j.entries)
	delete(next, gpuIndex)
	return j.flush(next)
}

// KeepMode ends the GPU's work in flight but for a MIG mode the agent set
// (ModeSet) and the record that it emptied the GPU (destroysBegun): an
// entry with a ModeSet is replaced by a SettingMIGMode entry holding only
// them, so that the change, if NVML still holds it pending, is cancelled
// once no spec asks for it; one with only destroys begun by a Draining
// entry of no devices with Emptied set (not a SettingMIGMode one, whose
// pending mode cancelOrphanModes would take as the agent's), so that the
// GPU the work left without devices is turned back to MIG mode off once no
// spec asks for it; any other entry is removed, as Clear does. A pass that
// stops before its NVML work (the devices got allocated while draining, the
// desired layout changed) calls it.
func (j *Journal) KeepMode(gpuIndex int) error {
	j.mu.Lock()
	old, ok := j.entries[gpuIndex]
	j.mu.Unlock()
	switch {
	case !ok || old.ModeSet == nil && !old.destroysBegun():
		return j.Clear(gpuIndex)
	case old.ModeSet == nil:
		if old.Step == StepDraining && len(old.Destroy) == 0 && len(old.Create) == 0 {
			return nil
		}
		return j.Record(JournalEntry{GPU: gpuIndex, UUID: old.UUID, Step: StepDraining, Desired: old.Desired, Emptied: true})
	case old.Step == StepSettingMIGMode && len(old.Destroy) == 0 && len(old.Create) == 0:
		return nil
	}
	return j.Record(JournalEntry{GPU: gpuIndex, UUID: old.UUID, Step: StepSettingMIGMode, Desired: old.Desired, ModeSet: old.ModeSet, Emptied: old.destroysBegun()})
}

// flush writes entries to the file (temporary file, fsync, rename, fsync of
// the directory) and, once they are there, makes them the journal's: a write
// that fails leaves memory as it was (the file too, but where only the
// directory's sync failed: the file may then hold entries memory lacks,
// which the next write replaces).
func (j *Journal) flush(entries map[int]JournalEntry) error {
	f := journalFile{Version: JournalVersion}
	for _, e := range entries {
		f.Entries = append(f.Entries, e)
	}
	sort.Slice(f.Entries, func(a, b int) bool { return f.Entries[a].GPU < f.Entries[b].GPU })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding journal: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(j.path), 0o755); err != nil {
		return fmt.Errorf("creating journal directory: %w", err)
	}
	// renameio writes a temporary file beside the journal (journalTemps),
	// syncs it and renames it over the journal.
	if err := renameio.WriteFile(j.path, data, 0o600, renameio.WithTempDir(filepath.Dir(j.path))); err != nil {
		return fmt.Errorf("writing journal: %w", err)
	}
	// The rename lasts once the directory is synced: until then a power
	// loss may bring the old file back, so the step it records is not
	// taken. (A file system that cannot sync a directory gives what it
	// can: see fsyncdir.Sync.)
	if err := fsyncdir.Sync(filepath.Dir(j.path)); err != nil {
		return fmt.Errorf("syncing journal directory: %w", err)
	}
	j.entries = entries
	return nil
}

// journalTemps matches the temporary files of writes of the journal at
// path that a kill interrupted before their rename: renameio names them
// "." + the journal's file name + a random number, beside it.
func journalTemps(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"[0-9]*")
}
