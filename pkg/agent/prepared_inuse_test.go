package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A device the kubelet plugin has prepared is in use from the start of the
// pass, allocation or not (a claim deallocated while its pod still runs): the
// GPU is Blocked at planning, nothing is drained or touched, and the pass's
// InUse (status.gpus[].inUse, which the Auto planner pins) names the device,
// also on a GPU that is already Ready.
func TestSyncCountsPreparedDevicesInUse(t *testing.T) {
	const prepared = "gpu-0-mig-3g40gb-9-4"
	tests := map[string]struct {
		layout     string
		wantPhase  v1alpha1.GPUPhase
		wantReason string
		// wantMsg is part of the result's message.
		wantMsg string
	}{
		"change destroying the prepared device: blocked before the drain": {
			layout:    "3g.40gb@0,2g.20gb@4,1g.10gb@6",
			wantPhase: v1alpha1.PhaseBlocked, wantReason: v1alpha1.ReasonDeviceInUse,
			wantMsg: "in use, not destroyed: " + prepared + " (allocated, prepared or running a process)",
		},
		"layout already applied: ready, the device reported in use": {
			layout:    "3g.40gb@0,3g.40gb@4",
			wantPhase: v1alpha1.PhaseReady, wantReason: v1alpha1.ReasonLayoutApplied,
			wantMsg: "layout applied",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.prep.names.Insert(prepared)
			before := g.sim.Snapshot()
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, tc.layout)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Results[0]
			if got.Phase != tc.wantPhase || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("result = %+v, want %s/%s with %q", got, tc.wantPhase, tc.wantReason, tc.wantMsg)
			}
			for i, p := range g.inv.pubs {
				if len(p.draining) != 0 {
					t.Errorf("publication %d drains %v: a prepared device is not drained, the GPU waits for it", i, p.draining)
				}
			}
			if diff := cmp.Diff(before.GPUs, g.sim.Snapshot().GPUs); diff != "" {
				t.Errorf("hardware changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff("3g.40gb@4", res.InUse[0].String()); diff != "" {
				t.Errorf("in use (-want +got):\n%s", diff)
			}
		})
	}
}
