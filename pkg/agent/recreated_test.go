package agent

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// refreshingPrepared is a Prepared that is a RecreatedRefresher: it counts
// the refreshes and fails them while fail is set.
type refreshingPrepared struct {
	fakePrepared
	refreshes int
	fail      bool
}

func (f *refreshingPrepared) RefreshRecreated(context.Context) map[types.UID]error {
	f.refreshes++
	if f.fail {
		return map[types.UID]error{"uid-1": errors.New("GPU 0 is being reconfigured")}
	}
	return nil
}

// TestPassRefreshesRecreatedPreparations: a pass that changed a GPU has the
// kubelet plugin bring up to date the preparations of devices it made again
// (a GPU reset destroyed a running pod's device, the pass made it again);
// a pass that changed nothing does not, unless the last refresh failed.
func TestPassRefreshesRecreatedPreparations(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	prep := &refreshingPrepared{fakePrepared: g.prep}
	g.r.Prepared = prep
	pass := func(layout string) {
		t.Helper()
		if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, layout)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		what          string
		layout        string
		fail          bool
		wantRefreshes int
	}{
		{what: "a pass that makes the layout", layout: "3g.40gb@0,3g.40gb@4", wantRefreshes: 1},
		{what: "a pass with nothing to change", layout: "3g.40gb@0,3g.40gb@4", wantRefreshes: 1},
		{what: "a pass that changes the layout, its refresh failing", layout: "7g.80gb@0", fail: true, wantRefreshes: 2},
		{what: "a pass with nothing to change after a failed refresh", layout: "7g.80gb@0", wantRefreshes: 3},
		{what: "a pass with nothing to change after a refresh that succeeded", layout: "7g.80gb@0", wantRefreshes: 3},
	} {
		prep.fail = step.fail
		pass(step.layout)
		if prep.refreshes != step.wantRefreshes {
			t.Errorf("after %s: %d refreshes, want %d", step.what, prep.refreshes, step.wantRefreshes)
		}
	}
}
