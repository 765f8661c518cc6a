package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestAutoStatusesCountEachWaitingReason: a pod the plan does not serve
// counts as waiting for room (status.auto.waitingForRoomPods) while it only
// waits for something to end or come back: devices in use (NoRoom), a
// Frozen node (WaitsForLostNode) or a pod that asks for every device of a
// node (WaitsForAllModeNode); as not servable for any other reason; and as
// neither while it waits for a claim it shares to be allocated
// (WaitsForSharedClaim).
func TestAutoStatusesCountEachWaitingReason(t *testing.T) {
	ml := migLayout("a").build()
	ml.UID, ml.Spec.Mode = k8stypes.UID("uid-a"), v1alpha1.ModeAuto
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{ml}}
	tests := map[string]struct {
		why  string
		want v1alpha1.AutoStatus
	}{
		"no room":                   {why: planner.NoRoom, want: v1alpha1.AutoStatus{WaitingForRoomPods: 1}},
		"waits for a lost node":     {why: planner.WaitsForLostNode, want: v1alpha1.AutoStatus{WaitingForRoomPods: 1}},
		"waits for an All-mode pod": {why: planner.WaitsForAllModeNode, want: v1alpha1.AutoStatus{WaitingForRoomPods: 1}},
		"waits for a shared claim":  {why: planner.WaitsForSharedClaim},
		"no profile satisfies it":   {why: "no profile of the Auto nodes' GPU models satisfies claim c", want: v1alpha1.AutoStatus{NotServablePods: 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := &planner.Result{Unservable: map[string]string{"ns/p": tc.why}}
			if diff := cmp.Diff(map[string]v1alpha1.AutoStatus{"a": tc.want}, AutoStatuses(in, planner.Snapshot{}, res)); diff != "" {
				t.Errorf("Auto statuses (-want +got):\n%s", diff)
			}
		})
	}
}
