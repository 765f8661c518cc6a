package controller

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestInputKeyFollowsUnplannedDevicesTaints: a taint put on (or taken off)
// one of miglayout's devices that the plan does not change (a whole GPU
// with MIG off, seen in the node's unplannedPool) changes the key: the
// planner may no longer count on that device, or may again.
func TestInputKeyFollowsUnplannedDevicesTaints(t *testing.T) {
	const driver = "mig.miglayout.io"
	n1 := node("n1", map[string]string{"pool": "auto"})
	key := func(taints ...resourceapi.DeviceTaint) string {
		slice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
			Pool:    resourceapi.ResourcePool{Name: unplannedPool("n1"), Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-1", Taints: taints}}}}
		slice.Name = unplannedPool("n1")
		return inputKey(AutoInputs{Driver: driver}, planner.Snapshot{Driver: driver, Nodes: []planner.Node{{Node: n1, OtherSlices: []*resourceapi.ResourceSlice{slice}}}})
	}
	if key(resourceapi.DeviceTaint{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}) == key() {
		t.Error("the key did not change when an unplanned device was tainted")
	}
}
