package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestResumesHalfDoneChangeWhoseSpecIsGone: the agent is killed after a
// disable destroyed the GPU's devices, before it turned MIG mode off, and
// the GPU's spec is gone when it starts again: the GPU, in MIG mode without
// a device, would publish nothing for good. The pass finishes the change
// (MIG mode off, the GPU published whole) and says so in its result.
func TestResumesHalfDoneChangeWhoseSpecIsGone(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	cm := &killingManager{Manager: g.mgr, at: 2, after: true} // both destroys done, then killed
	g.r.GPUs = cm
	if died, err := syncUntilKilled(g.r, []v1alpha1.GPUSpec{{Index: 0}}); !died {
		t.Fatalf("not killed: %v %v", err, cm.ops)
	}
	g.restart(t)
	res, err := g.r.Sync(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseReady || !strings.HasPrefix(got.Message, resumedNote) {
		t.Errorf("result %+v, want Ready with a message that begins %q", got, resumedNote)
	}
	if diff := cmp.Diff([]string{"-"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}
	if e := g.r.Journal.Entries(); len(e) != 0 {
		t.Errorf("journal left: %+v", e)
	}
	// Nothing more to finish: the next pass leaves the GPU alone.
	if res, err = g.r.Sync(context.Background(), nil, nil); err != nil || len(res.Results) != 0 {
		t.Errorf("next pass results %+v, %v; want none", res.Results, err)
	}
}
