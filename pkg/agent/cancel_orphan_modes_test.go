package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestCancelOrphanModes: a MIG mode change left pending on a GPU no spec
// asks anything of is cancelled where the journal shows the agent was
// setting the mode when it stopped (even before it recorded which mode),
// and left where the journal records the agent setting another mode than
// the one pending (someone else's change).
func TestCancelOrphanModes(t *testing.T) {
	for name, tc := range map[string]struct {
		entry      JournalEntry
		wantCancel bool
	}{
		"stopped while setting the mode, the mode not yet recorded": {
			entry: JournalEntry{GPU: 0, Step: StepSettingMIGMode}, wantCancel: true,
		},
		"the agent set the mode pending": {
			entry: JournalEntry{GPU: 0, Step: StepSettingMIGMode, ModeSet: ptr.To(true)}, wantCancel: true,
		},
		"the agent set another mode than the one pending": {
			entry: JournalEntry{GPU: 0, Step: StepSettingMIGMode, ModeSet: ptr.To(false)}, wantCancel: false,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			obs, unreadable, err := g.r.observe(t.Context())
			if err != nil || len(unreadable) > 0 {
				t.Fatal(err, unreadable)
			}
			obs[0].GPU.MIGMode.Pending = true // MIG mode enable pending
			e := tc.entry
			e.UUID = obs[0].GPU.UUID
			if err := g.r.Journal.Record(e); err != nil {
				t.Fatal(err)
			}
			failed := map[int]error{}
			cancelled, err := g.r.cancelOrphanModes(t.Context(), obs, nil, failed)
			if err != nil || len(failed) > 0 {
				t.Fatal(err, failed)
			}
			var wantLocked []int
			if tc.wantCancel {
				wantLocked = []int{0}
			}
			if cancelled != tc.wantCancel {
				t.Errorf("cancelled = %t, want %t", cancelled, tc.wantCancel)
			}
			if diff := cmp.Diff(wantLocked, g.locks.begun); diff != "" {
				t.Errorf("GPUs locked to set their MIG mode (-want +got):\n%s", diff)
			}
		})
	}
}
