package planner

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestAllModeBesideUncataloguedDevice: a GPU holds a MIG device of a
// profile the catalog lacks (1g.10gb-me, made out of band), which the
// agent publishes like any other, from what NVML reports. A pod asks for
// every MIG device of a node (allocation mode All). Where that device is
// allocated, kube-scheduler's allocator finds it among the matching
// devices and cannot allocate the claim on the node, so the plan must not
// serve the pod there; where it is free, the claim gets it too. Either
// way, what the plan serves the allocator allocates on the devices the
// node publishes once the plan has landed.
func TestAllModeBesideUncataloguedDevice(t *testing.T) {
	tests := map[string]struct {
		pinned    string
		selector  string // of the All-mode request; "" for every MIG device
		wantServe bool
	}{
		"allocated": {pinned: "1g.10gb-me@6"},
		"free":      {wantServe: true},
		// The planner knows neither its memory nor its engines as NVML
		// reports them: even a request for another profile is not
		// planned there (kube-scheduler would allocate this one).
		"allocated, another profile asked":       {pinned: "1g.10gb-me@6", selector: profileIs("3g.40gb")},
		"allocated, memory asked":                {pinned: "1g.10gb-me@6", selector: "device.attributes['mig.miglayout.io'].memory >= 9800"},
		"free, memory asked":                     {selector: "device.attributes['mig.miglayout.io'].memory >= 9000", wantServe: true},
		"+me.all allocated, an OFA engine asked": {pinned: "1g.10gb+me.all@6", selector: "device.capacity['mig.miglayout.io'].ofaEngines.compareTo(quantity('1')) >= 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1").gpu("A100-SXM4-80GB", "1g.10gb-me@6", tc.pinned).gpu("A100-SXM4-80GB", "", "").build()
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Nodes: []Node{n}, Pending: []Pod{pod("all", 1).claim(tc.selector, 0).allDevices().build()}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			served := servedNodes(res)["default/all"] == "n1"
			if served != tc.wantServe {
				t.Errorf("plan serves default/all on n1: %v, want %v (unservable %v)", served, tc.wantServe, res.Unservable)
			}
			if !served {
				return
			}
			// What the node publishes once the plan has landed: the
			// planned devices, and the uncatalogued one as the agent
			// publishes it.
			var devs []resourceapi.Device
			allocated := sets.New[structured.DeviceID]()
			for gi, g := range n.GPUs {
				layout := g.Layout
				for _, c := range res.Changes {
					if c.GPU == gi {
						layout = c.To
					}
				}
				for _, d := range layout {
					if dev, err := migslices.PlannedMIGDevice(g.Info, d); err == nil {
						devs = append(devs, dev)
						continue
					}
					real := gpu.MIGDevice{GPUIndex: g.Info.Index, Profile: d.Profile, ProfileID: 20,
						Placement: mig.Placement{Start: d.Start, Size: 1}, UUID: "MIG-out-of-band", MemoryMiB: 9856, Multiprocessors: 14, CopyEngines: 1}
					if strings.HasSuffix(d.Profile, "+me.all") {
						real.ProfileID, real.Decoders, real.JPEGEngines, real.OFAEngines = 21, 5, 1, 1
					}
					dev := migslices.MIGDevice(g.Info, real)
					devs = append(devs, dev)
					if g.Pinned.Contains(d) {
						allocated.Insert(structured.MakeDeviceID(driver, "n1", dev.Name))
					}
				}
			}
			pool := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: driver, NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1}, Devices: devs}}
			alloc, err := structured.NewAllocator(context.Background(), schedulerFeatures, structured.AllocatedState{AllocatedDevices: allocated},
				classLister{migClass().Name: migClass()}, []*resourceapi.ResourceSlice{pool}, cel.NewCache(10, cel.Features{}))
			if err != nil {
				t.Fatal(err)
			}
			out, err := alloc.Allocate(context.Background(), n.Node, []*resourceapi.ResourceClaim{snap.Pending[0].Claims[0].DeepCopy()})
			if err != nil || out == nil {
				t.Errorf("the plan serves default/all on n1 (changes %+v), but kube-scheduler's allocator does not allocate its claim there: %v", toTrace(res).Changes, err)
			}
		})
	}
}

// TestWaitingAllModePodAfterServedOnes: an All-mode pod the plan leaves
// waiting on a node (it serves another pod there) that kube-scheduler
// takes after every pod the plan serves there takes nothing from them: an
// allocated device of a profile the catalog lacks on the node does not
// keep those pods off it. (The planner takes larger pods first,
// kube-scheduler older ones.)
func TestWaitingAllModePodAfterServedOnes(t *testing.T) {
	for _, pinned := range []string{"", "1g.10gb-me@6"} {
		snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
			Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", pinned, pinned).gpu("A100-SXM4-80GB", "", "").build()},
			Pending: []Pod{
				pod("x", 9).claim(profileIs("3g.40gb"), 1).build(),
				pod("all", 1).claim(profileIs("2g.20gb"), 0).allDevices().build(),
				pod("y", 8).claim(profileIs("1g.10gb"), 1).build(),
			}}
		res, err := Plan(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		if servedNodes(res)["default/y"] != "n1" {
			t.Errorf("allocated %q: default/y not served on n1 (unservable %v), though the waiting All-mode pod is taken after it", pinned, res.Unservable)
		}
	}
}
