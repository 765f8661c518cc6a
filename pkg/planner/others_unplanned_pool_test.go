package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestUnplannedDeviceOfTheDriverGoesToOnePod: a device of miglayout's
// driver that the plan does not change (a whole GPU, MIG mode off,
// published in a pool of its own) is taken whole by the first pod planned
// with it, as another driver's device is: a second pod asking for it too
// waits for room.
func TestUnplannedDeviceOfTheDriverGoesToOnePod(t *testing.T) {
	wholeGPUs := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1/unplanned"},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1/unplanned", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}}}}}}
	gpuClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + driver + "' && device.attributes['" + driver + "'].type == 'gpu'"}}}}}
	withWholeGPU := func(b *podB) Pod {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-whole"}}
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: gpuClass.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
		b.p.Claims = append(b.p.Claims, c)
		return b.build()
	}
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{wholeGPUs}
	pods := []Pod{withWholeGPU(pod("first", 5).claim(profileIs("3g.40gb"), 1)), withWholeGPU(pod("second", 1).claim(profileIs("1g.10gb"), 1))}
	want := trace{
		Changes:    []string{"n1/0: (empty) -> 3g.40gb@4 serves default/first"},
		Served:     []string{"default/first -> n1 gpu-0-mig-3g40gb-9-4 after change"},
		Unservable: map[string]string{"default/second": NoRoom},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods, gpuClass))
}
