package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestSinglePodWaitsForAShareOfAnAdmittedDevice: a pod of one device whose
// class admits a shared NIC (consumable capacity) besides MIG devices, and
// asks for more bandwidth than a running pod's share leaves, waits for it
// (NoRoom); where the share leaves enough, it is served there.
func TestSinglePodWaitsForAShareOfAnAdmittedDevice(t *testing.T) {
	both := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "any"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + nicDriver + "' || (device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig')"}}}}}
	n := node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{shareableNIC("n1", "nic-0")}
	for name, held := range map[string]string{"shared used up": "10G", "shared with room": "4G"} {
		t.Run(name, func(t *testing.T) {
			var h OtherHolds
			h.Add(resourceapi.DeviceRequestAllocationResult{Driver: nicDriver, Pool: "n1", Device: "nic-0", ShareID: ptr.To(types.UID("running")),
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(held)}})
			p := pod("p", 1).claim("device.driver == '"+nicDriver+"'", 1).build()
			p.Claims[0].Spec.Devices.Requests[0].Exactly.DeviceClassName = "any"
			p.Claims[0].Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
				Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("6G")}}
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n}, Pending: []Pod{p}, OtherHeld: h,
				Classes: []*resourceapi.DeviceClass{migClass(), nicClass(), both}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if name == "shared used up" && got.Unservable["default/p"] != NoRoom {
				t.Errorf("a pod waiting for a share of a shared device is told %q, want NoRoom", got.Unservable["default/p"])
			}
			if name == "shared with room" && len(got.Served) != 1 {
				t.Errorf("served %v, unservable %v: want the pod served with a share of the NIC", got.Served, got.Unservable)
			}
		})
	}
}
