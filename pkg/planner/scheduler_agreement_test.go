package planner

import (
	"context"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// schedulerFeatures are the allocator features kube-scheduler 1.37 runs
// with by default (k8s.io/kubernetes pkg/features: DRAAdminAccess,
// DRAPrioritizedList, DRADeviceTaints, DRADeviceBindingConditions,
// DRAConsumableCapacity, DRAFractionalCapacityRange and
// DRAPartitionableDevices are on).
var schedulerFeatures = structured.Features{AdminAccess: true, PrioritizedList: true, DeviceTaints: true, DeviceBindingAndStatus: true,
	ConsumableCapacity: true, FractionalCapacityRange: true, PartitionableDevices: true}

// servedPods are the pods the plan serves, in name order.
func servedPods(res Result) []string {
	var out []string
	for _, s := range res.Served {
		out = append(out, s.Pod)
	}
	slices.Sort(out)
	return out
}

// schedulerReplay plays kube-scheduler once the plan's changes have landed:
// each node publishes the devices of its planned layouts (in publication
// order), the pinned ones allocated; the served pods are taken in the
// scheduler's queue order (priority, then age: oldest first, or newest
// first, since pods that wait re-enter the queue in an order no one
// controls) and each pod's claims are allocated on the node the plan
// serves it on by the scheduler's allocator, which knows nothing of the
// plan's reservations. It returns the served pods the scheduler cannot
// allocate there.
func schedulerReplay(t *testing.T, snap Snapshot, res Result, newestFirst bool) []string {
	t.Helper()
	return replayPending(t, snap, res, newestFirst, false)
}

// replayPending is schedulerReplay; with unserved set, the pending pods the
// plan does not serve are taken too, in their turn, each on the first node
// (by name) it may run on where the allocator gives it devices, as kube-scheduler tries
// every pending pod whatever a plan says of it.
func replayPending(t *testing.T, snap Snapshot, res Result, newestFirst, unserved bool) []string {
	t.Helper()
	ctx := context.Background()
	classes := classLister{}
	for _, c := range snap.Classes {
		classes[c.Name] = c
	}
	to := map[string]mig.Layout{}
	for _, c := range res.Changes {
		to[c.Node+"/"+itoa(c.GPU)] = c.To
	}
	state := sets.New(snap.OtherHeld.Devices...)
	pools := map[string][]*resourceapi.ResourceSlice{}
	nodes := map[string]Node{}
	for _, n := range snap.Nodes {
		name := n.Node.Name
		nodes[name] = n
		var devs []resourceapi.Device
		roomLost := map[string][]int{}
		for _, g := range n.GPUs {
			layout := g.Layout
			if l, ok := to[name+"/"+itoa(g.Info.Index)]; ok {
				layout = l
			}
			for _, d := range layout.Canonical() {
				dev, err := migslices.PlannedMIGDevice(g.Info, d)
				if err != nil {
					continue
				}
				devs = append(devs, dev)
				roomLost[dev.Name] = g.Info.Model.RoomLost(d)
				if g.Pinned.Contains(d) {
					state.Insert(structured.MakeDeviceID(snap.Driver, name, dev.Name))
				}
			}
		}
		migslices.SortDevices(devs, roomLost) // as the node publishes them
		pools[name] = append([]*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: snap.Driver, NodeName: ptr.To(name), Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}, Devices: devs}}},
			n.OtherSlices...)
	}
	servedOn := servedNodes(res)
	pods := slices.Clone(snap.Pending)
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].Pod, pods[j].Pod
		if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
			return pa > pb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp) != newestFirst
		}
		return podKey(a) < podKey(b)
	})
	allocated := sets.New[string]()
	var failed []string
	names := slices.Sorted(maps.Keys(nodes))
	for _, p := range pods {
		name, ok := servedOn[podKey(p.Pod)]
		if !ok && !unserved {
			continue
		}
		var claims []*resourceapi.ResourceClaim
		for _, c := range p.Claims {
			if !allocated.Has(claimKey(c)) {
				claims = append(claims, c.DeepCopy())
			}
		}
		if len(claims) == 0 {
			continue
		}
		allocate := func(name string) []resourceapi.AllocationResult {
			alloc, err := structured.NewAllocator(ctx, schedulerFeatures, structured.AllocatedState{AllocatedDevices: state.Clone()}, classes, pools[name], cel.NewCache(10, cel.Features{}))
			if err != nil {
				t.Fatal(err)
			}
			out, err := alloc.Allocate(ctx, nodes[name].Node, claims)
			if err != nil {
				return nil
			}
			return out
		}
		var out []resourceapi.AllocationResult
		if ok {
			if out = allocate(name); out == nil {
				failed = append(failed, podKey(p.Pod))
				continue
			}
		} else {
			for _, name := range names {
				if !feasible(p.Pod, nodes[name].Node) {
					continue // node selector, affinity, taints
				}
				if out = allocate(name); out != nil {
					break
				}
			}
		}
		for i, r := range out {
			for _, d := range r.Devices.Results {
				if !ptr.Deref(d.AdminAccess, false) {
					state.Insert(structured.MakeDeviceID(d.Driver, d.Pool, d.Device))
				}
			}
			allocated.Insert(claimKey(claims[i]))
		}
	}
	return failed
}

// capacity sets on the pod's last claim's request a capacity request
// (DRAConsumableCapacity): the device must publish at least q of capacity name.
func (b *podB) capacity(name, q string) *podB {
	c := b.p.Claims[len(b.p.Claims)-1]
	c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
		Requests: map[resourceapi.QualifiedName]resource.Quantity{resourceapi.QualifiedName(name): resource.MustParse(q)}}
	return b
}

// allDevices makes the pod's last claim's request ask for every matching device.
func (b *podB) allDevices() *podB {
	ex := b.p.Claims[len(b.p.Claims)-1].Spec.Devices.Requests[0].Exactly
	ex.AllocationMode, ex.Count = resourceapi.DeviceAllocationModeAll, 0
	return b
}

// adminAccess makes the pod's last claim's request one with admin access.
func (b *podB) adminAccess() *podB {
	b.p.Claims[len(b.p.Claims)-1].Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	return b
}

// lists adds a claim with one request per entry of profiles, named r0, r1...,
// each a prioritized list of one device of each profile in order.
func (b *podB) lists(profiles ...[]string) *podB {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: b.p.Pod.Name + "-lists"}}
	for i, ps := range profiles {
		req := resourceapi.DeviceRequest{Name: "r" + itoa(i)}
		for j, p := range ps {
			req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{Name: "s" + itoa(j), DeviceClassName: "mig.miglayout.io",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: profileIs(p)}}}})
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	}
	b.p.Claims = append(b.p.Claims, c)
	return b
}

// partitionableNICs gives the node a pool of the other driver in two
// slices, as DRAPartitionableDevices (on by default since 1.36) has it: one
// with a counter set, one with a device that consumes from it.
func partitionableNICs(n Node) Node {
	name := n.Node.Name
	pool := resourceapi.ResourcePool{Name: name + "-nic", Generation: 1, ResourceSliceCount: 2}
	n.OtherSlices = append(n.OtherSlices,
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-nic-counters"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: nicDriver, NodeName: &name, Pool: pool,
			SharedCounters: []resourceapi.CounterSet{{Name: "port", Counters: map[string]resourceapi.Counter{"vfs": {Value: resource.MustParse("2")}}}}}},
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-nic-devices"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: nicDriver, NodeName: &name, Pool: pool,
			Devices: []resourceapi.Device{{Name: "vf-0", ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "port",
				Counters: map[string]resourceapi.Counter{"vfs": {Value: resource.MustParse("1")}}}}}}}})
	return n
}

// The plan agrees with kube-scheduler's allocator (with the features it
// runs with) on the devices the plan makes: every pod the plan serves is
// allocated by the scheduler there, in the scheduler's order and without
// knowing the plan's reservations, and pods the scheduler can allocate
// once a GPU is repartitioned are served.
func TestPlanAgreesWithScheduler(t *testing.T) {
	tests := map[string]struct {
		nodes   []Node
		pods    []Pod
		classes []*resourceapi.DeviceClass
		// served are the pods the plan serves (nil: not checked beyond
		// count); count the number of them.
		served []string
		count  int
		// noChange: the plan changes no GPU.
		noChange bool
	}{
		// The scheduler's allocator (consumable capacity on) takes any
		// device with 30Gi of memory (3g.40gb and up).
		"a request for capacity (DRAConsumableCapacity) is served": {
			nodes:  []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:   []Pod{pod("cap", 1).claim("", 1).capacity("memory", "30Gi").build()},
			served: []string{"default/cap"}, count: 1,
		},
		// The scheduler's allocator (partitionable devices on) reads the
		// other driver's slices that share counters and allocates vf-0.
		"a MIG device with a device of another driver's partitionable pool is served": {
			nodes:   []Node{partitionableNICs(node("n1").gpu("A100-SXM4-80GB", "", "").build())},
			pods:    []Pod{pod("train", 1).claim(profileIs("3g.40gb"), 1).withNIC().build()},
			classes: []*resourceapi.DeviceClass{nicClass()},
			served:  []string{"default/train"}, count: 1,
		},
		// allocationMode All takes every matching device of the node once
		// it is scheduled (and fails while one is allocated): b's 1g.10gb,
		// planned beside it on n1, goes to the All claim, or the All
		// claim fails. n2 has room for b.
		"a device planned on the node of an All-mode claim it matches is not promised to another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{pod("all", 5).claim(profileIs("1g.10gb"), 0).allDevices().build(),
				pod("b", 1).claim(profileIs("1g.10gb"), 1).build()},
			served: []string{"default/all", "default/b"}, count: 2,
		},
		// Admin access does not take the device from other claims (the
		// scheduler counts no admin-access allocation as in use): the free
		// 1g.10gb serves both pods as it is.
		"a device given to a claim with admin access still serves another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", "4g.40gb@0,2g.20gb@4").build()},
			pods: []Pod{pod("admin", 5).claim(profileIs("1g.10gb"), 1).adminAccess().build(),
				pod("b", 1).claim(profileIs("1g.10gb"), 1).build()},
			served: []string{"default/admin", "default/b"}, count: 2, noChange: true,
		},
		// The same holds for a device a running pod holds with admin
		// access (GPU.Shared): it stays, and serves a pod as it is.
		"a device a running pod holds with admin access serves a pending pod as it is": {
			nodes:  []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,3g.40gb@4", "4g.40gb@0").shared("3g.40gb@4").build()},
			pods:   []Pod{pod("b", 1).claim(profileIs("3g.40gb"), 1).build()},
			served: []string{"default/b"}, count: 1, noChange: true,
		},
		// flex (higher priority: the scheduler takes it first) accepts any
		// device of 9000 MiB and up; the allocator gives it the first free
		// one in the order the node publishes them, smallest first: the
		// 1g.10gb planned for it, not the 3g.40gb@0 planned for big
		// (3g.40gb@4 is blocked by the 1g.10gb in use).
		"a flexible claim the scheduler takes first gets the smallest device, the one planned for it": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "1g.10gb@6").build()},
			pods: []Pod{pod("big", 5).claim(profileIs("3g.40gb"), 1).build(),
				pod("flex", 1).priority(10).claim("device.attributes['mig.miglayout.io'].memory >= 9000", 1).build()},
			served: []string{"default/big", "default/flex"}, count: 2,
		},
		// Claims of one profile: pair (two 3g.40gb on one GPU, planned
		// first: larger) and single (older: the scheduler may take it
		// first, and give it the first free 3g.40gb in publication
		// order). Pair on GPU 0 would lose its second device to single;
		// pair on GPU 1 and single on GPU 0 serves both in either order.
		"a claim the scheduler takes first does not get a device planned for another pod's matchAttribute": {
			nodes: []Node{withUUIDs(node("n1").policy(Policy{MaxGPUsPerNode: 2}).
				gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build())},
			pods: []Pod{pod("pair", 1).claim(profileIs("3g.40gb"), 2).sameGPU("parentUUID").build(),
				pod("single", 5).claim(profileIs("3g.40gb"), 1).build()},
			served: []string{"default/pair", "default/single"}, count: 2,
		},
		// Two devices of one profile (matchAttribute profile): r0 prefers
		// a 3g.40gb, else a 1g.10gb; r1 a 2g.20gb, else a 3g.40gb. The
		// scheduler allocates r0's first choice with r1's second on two
		// 3g.40gb, a combination of choices that are not each the same
		// rank in their lists.
		"prioritized lists of several requests are tried in combination": {
			nodes:  []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
			pods:   []Pod{pod("pair", 1).lists([]string{"3g.40gb", "1g.10gb"}, []string{"2g.20gb", "3g.40gb"}).sameGPU("profile").build()},
			served: []string{"default/pair"}, count: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: tc.pods, Classes: append([]*resourceapi.DeviceClass{migClass()}, tc.classes...), Now: t0}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			served := servedPods(res)
			if tc.served != nil {
				if diff := cmp.Diff(tc.served, served, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
				}
			} else if len(served) != tc.count {
				t.Errorf("served %d pods %v, want %d\nplan: %+v", len(served), served, tc.count, toTrace(res))
			}
			if tc.noChange && len(res.Changes) > 0 {
				t.Errorf("changes %v, want none\nplan: %+v", toTrace(res).Changes, toTrace(res))
			}
			for _, newestFirst := range []bool{false, true} {
				if failed := schedulerReplay(t, snap, res, newestFirst); len(failed) > 0 {
					t.Errorf("served by the plan, but the scheduler taking pods newest first=%t cannot allocate them: %v\nplan: %+v", newestFirst, failed, toTrace(res))
				}
			}
		})
	}
}

// A pod with an All-mode request and another pod that could share its
// only node wait for each other: the one planned first (the larger) is
// served, the other is told why it waits.
func TestPlanAllModeNodeServesOnePod(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{pod("all", 5).claim(profileIs("1g.10gb"), 0).allDevices().build(),
			pod("b", 1).claim(profileIs("3g.40gb"), 1).build()}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/b"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if diff := cmp.Diff(map[string]string{"default/all": WaitsForAllModeNode}, res.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s", diff)
	}
}

// A device given to a claim with admin access is shared: it must stay but
// is not used up, so a later pod may still get it (the scheduler counts no
// admin-access allocation as in use), also after later additions on its
// GPU move the plan's soft reservations.
func TestPlanSharedDeviceSurvivesLaterAdditions(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build()},
		// Planned in priority order: admin gets the free 1g.10gb@6 with
		// admin access; two2g and three3g are created beside it (the
		// second addition runs while two2g's device is a soft
		// reservation); one1g then fits the 1g.10gb@6 admin shares.
		Pending: []Pod{
			pod("admin", 1).priority(30).claim(profileIs("1g.10gb"), 1).adminAccess().build(),
			pod("two2g", 1).priority(20).claim(profileIs("2g.20gb"), 1).build(),
			pod("three3g", 1).priority(10).claim(profileIs("3g.40gb"), 1).build(),
			pod("one1g", 1).claim(profileIs("1g.10gb"), 1).build(),
		}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, s := range res.Served {
		served[s.Pod] = true
	}
	for _, p := range []string{"default/admin", "default/two2g", "default/three3g", "default/one1g"} {
		if !served[p] {
			t.Errorf("pod %s not served (the scheduler allocates it: the admin-access 1g.10gb@6 is not in use)\nplan: %+v", p, toTrace(res))
		}
	}
	for _, newestFirst := range []bool{false, true} {
		if failed := schedulerReplay(t, snap, res, newestFirst); len(failed) > 0 {
			t.Errorf("served by the plan, but the scheduler (newest first=%t) cannot allocate: %v", newestFirst, failed)
		}
	}
}
