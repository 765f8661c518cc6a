package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
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

// invalidNICPool is node's pool of the other driver in two slices that
// both name device, as while a driver republishes: the allocator refuses
// the pool (ErrFailedAllocationOnNode).
func invalidNICPool(node, device string) []*resourceapi.ResourceSlice {
	a, b := nicSlice(node, device), nicSlice(node, device)
	b.Name += "-b"
	a.Spec.Pool.ResourceSliceCount, b.Spec.Pool.ResourceSliceCount = 2, 2
	return []*resourceapi.ResourceSlice{a, b}
}

// rackSlicedPool is one pool of the other driver, "spine", in a slice per
// rack, each with one NIC.
func rackSlicedPool(racks ...string) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, r := range racks {
		s := sharedNICSlice(r, "nic-"+r)
		s.Spec.Pool = resourceapi.ResourcePool{Name: "spine", Generation: 1, ResourceSliceCount: int64(len(racks))}
		out = append(out, s)
	}
	return out
}

// shareableNIC is nicSlice with its devices open to several claims at once
// (consumable capacity), each with 10G of bandwidth shares may consume.
func shareableNIC(node string, devices ...string) *resourceapi.ResourceSlice {
	s := nicSlice(node, devices...)
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
		s.Spec.Devices[i].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: resource.MustParse("10G")}}
	}
	return s
}

// withNICShare adds to the pod a claim for a share of one device of the
// other driver that consumes bandwidth ("" asks for no capacity).
func (b *podB) withNICShare(bandwidth string) *podB {
	b.withNIC()
	if bandwidth != "" {
		c := b.p.Claims[len(b.p.Claims)-1]
		c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
			Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(bandwidth)}}
	}
	return b
}

// TestPlanWithSharedDevicesOfOtherDrivers: a device of another driver that
// allows multiple allocations (consumable capacity) is counted as
// kube-scheduler counts it: a share a running pod holds leaves it open to
// another claim while its capacity lasts, and so does a share the plan
// gives a pod.
func TestPlanWithSharedDevicesOfOtherDrivers(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
	n.OtherSlices = []*resourceapi.ResourceSlice{shareableNIC("n1", "nic-0")}
	nic0 := structured.MakeDeviceID(nicDriver, "n1", "nic-0")
	share := func(uid string, bandwidth string) OtherHolds {
		var h OtherHolds
		h.Add(resourceapi.DeviceRequestAllocationResult{Driver: nicDriver, Pool: "n1", Device: "nic-0", ShareID: ptr.To(types.UID(uid)),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(bandwidth)}})
		return h
	}
	tests := map[string]struct {
		pods []Pod
		held OtherHolds
		want trace
	}{
		"a share a running pod holds: the NIC still serves the pod": {
			pods: []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNICShare("6G").build()},
			held: share("running", "4G"),
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"two pending pods share the NIC": {
			pods: []Pod{pod("train", 2).claim(profileIs("3g.40gb"), 1).withNICShare("4G").build(),
				pod("tune", 1).claim(profileIs("3g.40gb"), 1).withNICShare("4G").build()},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@0,3g.40gb@4 serves default/train, default/tune"},
				Served: []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change",
					"default/tune -> n1 gpu-0-mig-3g40gb-9-0 after change"},
			},
		},
		"the running pod's share leaves too little bandwidth": {
			pods: []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNICShare("8G").build()},
			held: share("running", "4G"),
			want: trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
		"the first pod's planned share leaves too little for the second": {
			pods: []Pod{pod("train", 2).claim(profileIs("3g.40gb"), 1).withNICShare("8G").build(),
				pod("tune", 1).claim(profileIs("3g.40gb"), 1).withNICShare("4G").build()},
			want: trace{
				Changes:    []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:     []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
				Unservable: map[string]string{"default/tune": NoRoom},
			},
		},
		// A share that asks for no capacity takes all of it.
		"a share a running pod holds, and a share asking for all of the bandwidth": {
			pods: []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNICShare("").build()},
			held: share("running", "4G"),
			want: trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
		"the NIC held whole: no share of it": {
			pods: []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNICShare("1G").build()},
			held: OtherHolds{Devices: []structured.DeviceID{nic0}},
			want: trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n}, Pending: tc.pods, OtherHeld: tc.held,
				Classes: []*resourceapi.DeviceClass{migClass(), nicClass()}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// unplannedWholeGPU is a pool of miglayout's driver on n1 the plan does not
// change: GPU 1, MIG mode off, published whole as gpu-1.
func unplannedWholeGPU() *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1/unplanned"},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1/unplanned", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}}}}}}
}

// wholeGPUClass is the DeviceClass of miglayout's whole GPUs.
func wholeGPUClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + driver + "' && device.attributes['" + driver + "'].type == 'gpu'"}}}}}
}

// withWholeGPU gives the pod one more claim, for a whole GPU
// (wholeGPUClass).
func withWholeGPU(b *podB) *podB {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-whole"}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	b.p.Claims = append(b.p.Claims, c)
	return b
}

// TestPlanWithUnplannedDevicesOfTheDriver: miglayout's devices of a node
// that the plan does not change (GPU 1, MIG mode off, published whole) are
// seen as kube-scheduler sees them: a pod asking for a MIG device and a
// whole GPU is planned where the whole GPU is free, and waits where a
// claim holds it.
func TestPlanWithUnplannedDevicesOfTheDriver(t *testing.T) {
	tests := map[string]struct {
		held OtherHolds
		want trace
	}{
		"the whole GPU free": {want: trace{
			Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
			Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
		}},
		"the whole GPU held by a claim": {
			held: OtherHolds{Devices: []structured.DeviceID{structured.MakeDeviceID(driver, "n1/unplanned", "gpu-1")}},
			want: trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
			n.OtherSlices = []*resourceapi.ResourceSlice{unplannedWholeGPU()}
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n}, OtherHeld: tc.held,
				Pending: []Pod{withWholeGPU(pod("train", 1).claim(profileIs("3g.40gb"), 1)).build()},
				Classes: []*resourceapi.DeviceClass{migClass(), wholeGPUClass()}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// withBinding makes every device of s wait for binding conditions.
func withBinding(s *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].BindingConditions = []string{"nic.example.com/Attached"}
		s.Spec.Devices[i].BindingFailureConditions = []string{"nic.example.com/Failed"}
	}
	return s
}

// sharedNICSlice is a pool of the other driver shared by the nodes labelled
// rack=rack ("" = all nodes).
func sharedNICSlice(rack string, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric-" + rack},
		Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver,
			Pool: resourceapi.ResourcePool{Name: "fabric-" + rack, Generation: 1, ResourceSliceCount: 1}},
	}
	if rack == "" {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{rack}}}}}}
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
	withNICs := func(n Node, s ...*resourceapi.ResourceSlice) Node {
		n.OtherSlices = s
		return n
	}
	gpuNode := func() Node { return node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build() }
	rackNode := func(name, rack string) Node {
		return node(name).label("rack", rack).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
	}
	pods := []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNIC().build()}
	tests := map[string]struct {
		nodes     []Node
		pods      []Pod
		allocated []structured.DeviceID
		want      trace
	}{
		"two pods, one NIC: the second is not planned on the NIC the first counts on": {
			nodes: []Node{withNICs(gpuNode(), nicSlice("n1", "nic-0"))},
			pods: []Pod{pod("train", 2).claim(profileIs("3g.40gb"), 1).withNIC().build(),
				pod("tune", 1).claim(profileIs("3g.40gb"), 1).withNIC().build()},
			want: trace{
				Changes:    []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:     []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
				Unservable: map[string]string{"default/tune": NoRoom},
			},
		},
		"a MIG device and a NIC of another driver are planned together": {
			nodes: []Node{withNICs(gpuNode(), nicSlice("n1", "nic-0"))},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a NIC that waits for binding conditions is usable, as in kube-scheduler": {
			nodes: []Node{withNICs(gpuNode(), withBinding(nicSlice("n1", "nic-0")))},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"the node's NIC is taken: nothing is changed for the pod": {
			nodes:     []Node{withNICs(gpuNode(), nicSlice("n1", "nic-0"))},
			allocated: []structured.DeviceID{structured.MakeDeviceID(nicDriver, "n1", "nic-0")},
			want:      trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
		"a NIC pool shared by the nodes of one rack: planned on a node of that rack": {
			nodes: []Node{
				withNICs(rackNode("n1", "x"), sharedNICSlice("y", "nic-0")),
				withNICs(rackNode("n2", "y"), sharedNICSlice("y", "nic-0")),
			},
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a NIC pool for all nodes, its only NIC taken: nothing is changed for the pod": {
			nodes:     []Node{withNICs(gpuNode(), sharedNICSlice("", "nic-0"))},
			allocated: []structured.DeviceID{structured.MakeDeviceID(nicDriver, "fabric-", "nic-0")},
			want:      trace{Unservable: map[string]string{"default/train": NoRoom}},
		},
		"a node whose NIC pool is invalid for a moment (two slices name one device): planned on another node, as kube-scheduler's Filter does": {
			nodes: []Node{
				withNICs(node("n1").gpu("A100-SXM4-80GB", "3g.40gb@4", "").build(), invalidNICPool("n1", "nic-0")...),
				withNICs(node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), nicSlice("n2", "nic-0")),
			},
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a NIC pool in a slice per rack (the snapshot gives a node the whole pool): planned on a node of the rack with a NIC": {
			nodes: []Node{withNICs(rackNode("n1", "y"), rackSlicedPool("x", "y")...)},
			want: trace{
				Changes: []string{"n1/0: 7g.80gb@0 -> 3g.40gb@4 serves default/train"},
				Served:  []string{"default/train -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"a node without the other driver's devices cannot serve it": {
			nodes: []Node{gpuNode()},
			want:  trace{Unservable: map[string]string{"default/train": "no Auto-mode node can hold all of the pod's claims at once, even with every GPU free"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pending := pods
			if tc.pods != nil {
				pending = tc.pods
			}
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: pending, OtherHeld: OtherHolds{Devices: tc.allocated},
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

// TestProfileOutsideAllowedProfilesIsNotServable: a pod whose claim only
// profiles the nodes' policies forbid is satisfied by can never be served
// there: it is told so (not that it waits for room), and a pod a node may
// serve with an allowed profile is served there.
func TestProfileOutsideAllowedProfilesIsNotServable(t *testing.T) {
	only1g := Policy{AllowedProfiles: []string{"1g.10gb"}}
	tests := map[string]struct {
		nodes      []Node
		pod        Pod
		wantServed string
		wantWhy    string
	}{
		"forbidden everywhere": {
			nodes:   []Node{node("n1").policy(only1g).gpu("A100-SXM4-80GB", "", "").build()},
			pod:     pod("p", 1).claim(profileIs("3g.40gb"), 1).build(),
			wantWhy: "claim p-gpu is satisfied by 3g.40gb, which the Auto policy (allowedProfiles) of no node the pod may run on allows",
		},
		"allowed on another node": {
			nodes: []Node{
				node("n1").policy(only1g).gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "", "").build(),
			},
			pod:        pod("p", 1).claim(profileIs("3g.40gb"), 1).build(),
			wantServed: "n2",
		},
		"one of the claim's profiles is allowed": {
			nodes:      []Node{node("n1").policy(only1g).gpu("A100-SXM4-80GB", "", "").build()},
			pod:        pod("p", 1).claim("device.attributes['mig.miglayout.io'].profile in ['3g.40gb', '1g.10gb']", 1).build(),
			wantServed: "n1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: tc.nodes, Pending: []Pod{tc.pod}, Classes: []*resourceapi.DeviceClass{migClass()}})
			if err != nil {
				t.Fatal(err)
			}
			gotServed := ""
			for _, s := range res.Served {
				gotServed = s.Node
			}
			if gotServed != tc.wantServed || res.Unservable["default/p"] != tc.wantWhy {
				t.Errorf("served on %q, unservable %q; want served on %q, unservable %q", gotServed, res.Unservable["default/p"], tc.wantServed, tc.wantWhy)
			}
			if _, kept := res.Kept["default/p"]; kept {
				t.Errorf("a placement is kept for the pod: %v", res.Kept)
			}
		})
	}
}

// TestExistingDeviceOutsideAllowedProfilesServes: allowedProfiles limits the
// profiles the planner may create (AutoPolicy, Policy.AllowedProfiles); a
// free device of another profile that exists already on the node (left
// from before the policy) serves a pod that claims it, as it did before
// the NotServable check: the pod is not told it can never be served.
func TestExistingDeviceOutsideAllowedProfilesServes(t *testing.T) {
	only1g := Policy{AllowedProfiles: []string{"1g.10gb"}}
	n := node("n1").policy(only1g).gpu("A100-SXM4-80GB", "3g.40gb@4", "").build()
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n},
		Pending: []Pod{pod("p", 1).claim(profileIs("3g.40gb"), 1).build()}, Classes: []*resourceapi.DeviceClass{migClass()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Served) != 1 || res.Served[0].Node != "n1" {
		t.Errorf("served %v, unservable %q; want served on n1 by its free 3g.40gb", res.Served, res.Unservable["default/p"])
	}
}

// TestForbiddenClaimCostDoesNotGrowWithGPUs: telling a pod that no node's
// allowedProfiles allows its claim costs about the same whatever the number
// of GPUs of the nodes (all of one policy and kind): the planner serves
// 5000 pods on 1000 nodes × 8 GPUs within its budget (BenchmarkPlanFull),
// so a per-pod check must not walk (and allocate for) every GPU.
func TestForbiddenClaimCostDoesNotGrowWithGPUs(t *testing.T) {
	only1g := Policy{AllowedProfiles: []string{"1g.10gb"}, MaxGPUsPerNode: 8}
	allocs := func(nodes int) float64 {
		snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}}
		for i := range nodes {
			b := node(fmt.Sprintf("n%04d", i)).policy(only1g)
			for range 8 {
				b.gpu("A100-SXM4-80GB", "", "")
			}
			snap.Nodes = append(snap.Nodes, b.build())
		}
		pl, err := NewPlanner(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		return testing.AllocsPerRun(50, func() {
			i++
			if err := pl.Add(context.Background(), pod(fmt.Sprintf("p%03d", i), 1).claim(profileIs("3g.40gb"), 1).build()); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(10), allocs(500)
	if large > 2*small+100 {
		t.Errorf("allocations per pod no node's policy allows: %.0f with 10 nodes, %.0f with 500 nodes × 8 GPUs; want about the same", small, large)
	}
}
