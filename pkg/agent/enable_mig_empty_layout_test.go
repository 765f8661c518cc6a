package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSyncEnablesMIGForAnEmptyLayout: a spec asking for MIG on with no
// devices, on a GPU whose MIG mode is off, is not met until MIG is on: the
// pass turns it on, and only then is the GPU Ready.
func TestSyncEnablesMIGForAnEmptyLayout(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.syncReady(t, []v1alpha1.GPUSpec{spec(0, "")})
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent {
		t.Errorf("MIG current %t pending %t after a pass asking for MIG on, want on", st.MIGCurrent, st.MIGPending)
	}
	g.wantLayouts(t, "")
}
