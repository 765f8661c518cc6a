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

// anyClassPod is a pod of one device of anyDeviceOfTheDriverClass.
func anyClassPod(name string) Pod {
	p := pod(name, 1).claim("", 1).build()
	p.Claims[0].Spec.Devices.Requests[0].Exactly.DeviceClassName = "any.miglayout.io"
	return p
}

// The node whose free device the plan does not make serves the pod, even
// after a node where a MIG device would have to be made.
func TestSinglePodOnAFreeDeviceNotPlannedOfALaterNode(t *testing.T) {
	n0 := node("n0").gpu("A100-SXM4-80GB", "", "").build()
	n1 := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n1.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
	got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n0, n1}, Pending: []Pod{anyClassPod("p")},
		Classes: []*resourceapi.DeviceClass{migClass(), anyDeviceOfTheDriverClass()}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(trace{Served: []string{"default/p -> n1 "}}, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A large pod whose class admits a device the plan does not make, held by
// a claim, is planned as before: a placement is kept for it where a device
// in use stands in the way.
func TestSinglePodKeepsItsPlacementBesideAHeldDeviceNotPlanned(t *testing.T) {
	for name, withOther := range map[string]bool{"no device not planned": false, "one, held": true} {
		t.Run(name, func(t *testing.T) {
			n1 := node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build()
			var held OtherHolds
			if withOther {
				n1.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
				held = OtherHolds{Devices: []structured.DeviceID{structured.MakeDeviceID(driver, "n1/unplanned", "gpu-1")}}
			}
			p := anyClassPod("big")
			p.Claims[0].Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.attributes['mig.miglayout.io'].type == 'gpu' || " + profileIs("7g.80gb")}}}
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n1}, OtherHeld: held, Pending: []Pod{p},
				Classes: []*resourceapi.DeviceClass{migClass(), anyDeviceOfTheDriverClass()}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"default/big": "n1/gpu-0 7g.80gb@0"}, toTrace(got).Kept); diff != "" {
				t.Errorf("kept placements (-want +got):\n%s", diff)
			}
		})
	}
}

// A free MIG device that exists serves a pod whose class also admits a
// whole GPU, even on an earlier node than the free whole GPU, which is then
// left for a pod that asks for a whole GPU.
func TestSinglePodTakesAFreeMIGDeviceBeforeAWholeGPU(t *testing.T) {
	n0 := node("n0").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build()
	n1 := node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build()
	n1.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
	got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n0, n1}, Now: t0,
		Pending: []Pod{anyClassPod("a"), withWholeGPU(pod("b", 0)).build()},
		Classes: []*resourceapi.DeviceClass{migClass(), anyDeviceOfTheDriverClass(), wholeGPUClass()}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace{Served: []string{"default/a -> n0 gpu-0-mig-1g10gb-19-6", "default/b -> n1 "}}
	if diff := cmp.Diff(want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A pod of one whole GPU, whose only admitted device a claim holds, waits
// for it (NoRoom), rather than being told nothing can serve it.
func TestSinglePodOfAHeldWholeGPUWaits(t *testing.T) {
	n1 := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n1.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
	held := OtherHolds{Devices: []structured.DeviceID{structured.MakeDeviceID(driver, "n1/unplanned", "gpu-1")}}
	got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n1}, OtherHeld: held, Now: t0,
		Pending: []Pod{withWholeGPU(pod("b", 0)).build()}, Classes: []*resourceapi.DeviceClass{migClass(), wholeGPUClass()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(trace{Unservable: map[string]string{"default/b": NoRoom}}, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
