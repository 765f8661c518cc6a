package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestUnplannedDeviceOfTheDriverGoesToOnePod: a device of miglayout's
// driver that the plan does not change (a whole GPU, MIG mode off,
// published in a pool of its own) is taken whole by the first pod planned
// with it, as another driver's device is: a second pod asking for it too
// waits for room.
func TestUnplannedDeviceOfTheDriverGoesToOnePod(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
	pods := []Pod{withWholeGPU(pod("first", 5).claim(profileIs("3g.40gb"), 1)).build(), withWholeGPU(pod("second", 1).claim(profileIs("1g.10gb"), 1)).build()}
	want := trace{
		Changes:    []string{"n1/0: (empty) -> 3g.40gb@4 serves default/first"},
		Served:     []string{"default/first -> n1 gpu-0-mig-3g40gb-9-4 after change"},
		Unservable: map[string]string{"default/second": NoRoom},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods, wholeGPUClass()))
}
