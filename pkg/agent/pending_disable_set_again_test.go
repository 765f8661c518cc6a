package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSyncSetsPendingMIGDisableAgainOnceIdle: an Ampere GPU's MIG disable
// set while another NVML client held the GPU is pending; the spec asks for
// MIG off, and once the client is gone the agent sets the mode again, which
// applies it without a reset: the GPU is Ready with MIG off, not left
// waiting for a reboot.
func TestSyncSetsPendingMIGDisableAgainOnceIdle(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	ctx := t.Context()
	g.setup(t, 0, "")
	client, err := g.sim.OpenClient(g.sim.Snapshot().GPUs[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if mode, err := g.mgr.SetMIGMode(ctx, 0, false); err != nil || !mode.Current || mode.Pending {
		t.Fatalf("disabling MIG while another NVML client holds the GPU: mode %+v, err %v; want a disable pending", mode, err)
	}
	if err := g.sim.CloseClient(client); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: false}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("once idle: %+v, want Ready", got)
	}
	if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent || st.MIGPending {
		t.Errorf("MIG current %t pending %t, want both off", st.MIGCurrent, st.MIGPending)
	}
}
