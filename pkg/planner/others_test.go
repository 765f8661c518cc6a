package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

const nicDriver = "nic.example.com"

func nicClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: nicDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + nicDriver + "'"}}}},
	}
}

// nicSlice is a node's pool of the other driver with the named devices.
func nicSlice(node string, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
	}
	return s
}

// withNIC adds to the pod a claim for one device of the other driver.
func (b *podB) withNIC() *podB {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-nic"}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	b.p.Claims = append(b.p.Claims, c)
	return b
}

func TestPlanWithOtherDrivers(t *testing.T) {
	withNICs := func(n Node, s *resourceapi.ResourceSlice) Node {
		n.OtherSlices = []*resourceapi.ResourceSlice{s}
		return n
	}
	gpuNode := func() Node { return node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build() }
	pods := []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNIC().build()}
	tests := map[string]struct {
		nodes     []Node
		allocated []structured.DeviceID
		want      trace
	}{
		"a MIG device and a NIC of another driver are planned together": {
			nodes: []Node{withNICs(gpuNode(), nicSlice("n1", "nic-0"))},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"the node's NIC is taken: nothing is changed for the pod": {
			nodes:     []Node{withNICs(gpuNode(), nicSlice("n1", "nic-0"))},
			allocated: []structured.DeviceID{structured.MakeDeviceID(nicDriver, "n1", "nic-0")},
			want:      trace{Unservable: map[string]string{"default/train": "no Auto-mode node can hold all of the pod's claims at once"}},
		},
		"a node without the other driver's devices cannot serve it": {
			nodes: []Node{gpuNode()},
			want:  trace{Unservable: map[string]string{"default/train": "no Auto-mode node can hold all of the pod's claims at once"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: pods, OtherAllocated: tc.allocated,
				Classes: []*resourceapi.DeviceClass{migClass(), nicClass()}}
			got, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
