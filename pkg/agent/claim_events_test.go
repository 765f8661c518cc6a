package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestClaimEventsWakeTheNodeOfTheirDevices: a ResourceClaim event starts a
// pass of the node's NodeMigLayout only where the claim's allocation holds
// a device of this node's pool, so that a claim released there unblocks a
// GPU at once rather than at the next resync.
func TestClaimEventsWakeTheNodeOfTheirDevices(t *testing.T) {
	r := &NodeReconciler{NodeName: "n1", Repartitioner: &Repartitioner{Driver: testDriver}}
	otherPool := allocatedClaim("other-pool").obj()
	otherPool.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: testDriver, Pool: "n2", Device: devA},
	}
	otherDriver := allocatedClaim("other-driver").obj()
	otherDriver.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: devA},
	}
	pass := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "n1"}}}
	tests := map[string]struct {
		obj  client.Object
		want []reconcile.Request
	}{
		"a device of this node":         {obj: allocatedClaim("here").device(devA, false).obj(), want: pass},
		"not allocated":                 {obj: &resourceapi.ResourceClaim{}},
		"a device of another node":      {obj: otherPool},
		"another driver's device":       {obj: otherDriver},
		"an object that is not a claim": {obj: &corev1.Pod{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.claimToNode(t.Context(), tc.obj)); diff != "" {
				t.Errorf("passes asked (-want +got):\n%s", diff)
			}
		})
	}
}
