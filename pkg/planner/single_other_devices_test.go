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

// anyDeviceOfTheDriverClass admits every device of miglayout's driver: MIG
// devices and whole GPUs (MIG mode off) alike.
func anyDeviceOfTheDriverClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "any.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + driver + "'"}}}}}
}

// TestSinglePodJudgedWithDevicesNotPlanned: a pod of one device whose class
// also admits a device the plan does not make (a GPU with MIG off, published
// whole) is judged by the allocator with it, as kube-scheduler judges it:
// where that device is free no GPU is repartitioned for the pod, which
// kube-scheduler gives the free device; where a claim holds it, a MIG
// device is made.
func TestSinglePodJudgedWithDevicesNotPlanned(t *testing.T) {
	for name, tc := range map[string]struct {
		held OtherHolds
		want trace
	}{
		"the whole GPU free": {want: trace{Served: []string{"default/p -> n1 "}}}, // the whole GPU, another pool's
		"the whole GPU held by a claim": {
			held: OtherHolds{Devices: []structured.DeviceID{structured.MakeDeviceID(driver, "n1/unplanned", "gpu-1")}},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
			n.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
			p := pod("p", 1).claim("", 1).build()
			p.Claims[0].Spec.Devices.Requests[0].Exactly.DeviceClassName = "any.miglayout.io"
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n}, OtherHeld: tc.held, Pending: []Pod{p},
				Classes: []*resourceapi.DeviceClass{migClass(), anyDeviceOfTheDriverClass()}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
