package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// startsPassOnRead is a client whose first read of NodeMigLayout node
// finds that node's agent started a new pass on GPU 0 since the plan read
// it (the claim that blocked it released): Draining.
type startsPassOnRead struct {
	client.Client
	node    string
	started bool
}

func (c *startsPassOnRead) Get(ctx context.Context, key types.NamespacedName, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && key.Name == c.node && !c.started {
		c.started = true
		var n v1alpha1.NodeMigLayout
		if err := c.Client.Get(ctx, key, &n); err != nil {
			return err
		}
		n.Status.GPUs[0].Phase, n.Status.GPUs[0].Reason, n.Status.GPUs[0].InUse = v1alpha1.PhaseDraining, "Draining", ""
		if err := c.Client.Status().Update(ctx, &n); err != nil {
			return err
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestBlockedCancelLostHoldsChanges: n1's change for p1 is blocked by a
// device in use; the plan cancels it and plans p1 on n2. Between the plan
// and its write, n1's agent starts a pass (the device released), so the
// cancel is not written: the change on n2 is not written either (p1 would
// have two GPUs repartitioned for it), and waits for the next plan.
func TestBlockedCancelLostHoldsChanges(t *testing.T) {
	h := blockedCancelLostCluster(t)
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@0,3g.40gb@4" {
		t.Fatalf("n1/gpu-0 desired %q, want the change its agent started on kept", got)
	}
	if got, ok := h.specOf("n2")[0]; ok {
		t.Errorf("n2/gpu-0 desired %q while n1/gpu-0's change for p1 goes on: p1 served twice", got)
	}
	for _, e := range h.events() {
		if strings.Contains(e, "WaitingForRepartition") && strings.Contains(e, "n2") {
			t.Errorf("event %q tells of a change that was not written", e)
		}
	}
}

// staleAfterPatch is a client whose reads of a NodeMigLayout it patched
// return it as it was before the patch: an informer cache that has not
// delivered the write yet.
type staleAfterPatch struct {
	client.Client
	before map[string]*v1alpha1.NodeMigLayout
}

func (c *staleAfterPatch) Get(ctx context.Context, key types.NamespacedName, obj client.Object, opts ...client.GetOption) error {
	if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && c.before[key.Name] != nil {
		c.before[key.Name].DeepCopyInto(n)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *staleAfterPatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	n, ok := obj.(*v1alpha1.NodeMigLayout)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	var before v1alpha1.NodeMigLayout
	if err := c.Client.Get(ctx, types.NamespacedName{Name: n.Name}, &before); err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if c.before[n.Name] == nil {
		c.before[n.Name] = &before
	}
	return nil
}

// TestApplyWritesChangeAfterCancelFromCache: a plan cancels a reclaim in
// flight on n1's GPU 0 and gives its slot to a change on GPU 1. The cache
// has not seen the cancel's write when the change is written: the change
// is written all the same, on the NodeMigLayout the cancel's write
// returned, not dropped as though someone else had changed the node.
func TestApplyWritesChangeAfterCancelFromCache(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = "uid-auto", v1alpha1.ModeAuto
	const small = "1g.10gb@0,1g.10gb@1"
	live := ownedBy(&v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "gives the GPU, idle for 5m0s, back whole"},
			{Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, MIGEnabled: true, MIGPending: true, Layout: small, Phase: v1alpha1.PhaseDraining},
			{Index: 1, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}, &auto)
	cancel, ok := inFlightReclaim(live, 0)
	if !ok {
		t.Fatal("no reclaim in flight on GPU 0")
	}
	change := planner.Change{Node: "n1", GPU: 1, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("4g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p1"}}
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&auto, live.DeepCopy()).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	a := &AutoPlanner{Client: &staleAfterPatch{Client: c, before: map[string]*v1alpha1.NodeMigLayout{}}}
	if _, err := a.apply(ctx, map[string]*v1alpha1.NodeMigLayout{"n1": live}, liveGenerations(t, c), []planner.Change{change}, []planner.Change{cancel}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	var layouts []string
	for _, g := range got.Spec.GPUs {
		layouts = append(layouts, g.Layout)
	}
	if diff := cmp.Diff([]string{small, "4g.40gb@0,3g.40gb@4"}, layouts); diff != "" {
		t.Errorf("desired layouts (-want: the reclaim cancelled, the change written; +got):\n%s", diff)
	}
}

// TestBlockedCancelFreesNodeSlot: n1's GPU 0 change for p1 is blocked by a
// device in use, and n1 may change one GPU at once. The plan that cancels
// it gives the node's slot to GPU 1: p1 is served there in the same plan,
// not one plan later (after the agent has reported the cancelled GPU
// Ready) nor on another node.
func TestBlockedCancelFreesNodeSlot(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml,
		a100(0).layout("7g.80gb@0").inUse("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed"),
		a100(1).layout("7g.80gb@0"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{
		{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "serves 1 pending pod(s): ns/p1", ServedPods: []string{"ns/p1"}},
		{Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), n1,
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	got := h.specOf("n1")
	if got[0] != "7g.80gb@0" {
		t.Errorf("n1/gpu-0 desired %q, want the blocked change cancelled (7g.80gb@0)", got[0])
	}
	if !strings.Contains(got[1], "3g.40gb") {
		t.Errorf("n1/gpu-1 desired %q, want a change making a 3g.40gb device for p1 in the plan that cancels gpu-0's", got[1])
	}
}

// wholeGPUFixture is n1 (pool auto) of an Auto MigLayout with GPU 0 whole
// in MIG mode and GPUs 1 and 2 with MIG mode off, its agent publishing GPU
// 0's device and gpu-1 whole, a DeviceClass of whole GPUs, and pod p1
// asking for a 3g.40gb device (c1) and a whole GPU (c2). wholeClaim makes a
// claim for a whole GPU.
func wholeGPUFixture() (ml *v1alpha1.MigLayout, slice *resourceapi.ResourceSlice, objs []client.Object, wholeClaim func(string) *resourceapi.ResourceClaim) {
	gpuClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'gpu'"}}}}}
	slice = &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-mig"},
		Spec: resourceapi.ResourceSliceSpec{Driver: migClassName, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{
				{Name: "gpu-0-mig-7g80gb-0-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("mig")}, "profile": {StringValue: ptr.To("7g.80gb")}}},
				wholeGPUDevice("gpu-1"),
			}}}
	wholeClaim = func(name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuClass.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	}
	ml = autoMigLayout("auto", nil)
	objs = []client.Object{node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0"), a100(1).migOff(), a100(2).migOff()),
		slice, gpuClass, autoClaim("c1", profileSelector("3g.40gb")), wholeClaim("c2"), autoPod("p1", h0(), "c1", "c2")}
	return ml, slice, objs, wholeClaim
}

func wholeGPUDevice(name string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}}}
}

// heldWholeGPU is a claim that holds n1's gpu-1.
func heldWholeGPU(wholeClaim func(string) *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c := wholeClaim("running")
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: migClassName, Pool: "n1", Device: "gpu-1"}}}}
	return c
}

// TestAutoPlansBesideWholeGPU: n1's GPU 1 has MIG mode off, published whole
// (gpu-1): Auto mode does not change it, but kube-scheduler may allocate it
// with a MIG device it makes on GPU 0. A pod asking for a 3g.40gb device
// and a whole GPU is planned there; with gpu-1 held by a claim it waits.
func TestAutoPlansBesideWholeGPU(t *testing.T) {
	for name, held := range map[string]bool{"gpu-1 free": false, "gpu-1 held": true} {
		t.Run(name, func(t *testing.T) {
			ml, _, objs, wholeClaim := wholeGPUFixture()
			if held {
				objs = append(objs, heldWholeGPU(wholeClaim))
			}
			h := newAutoCluster(t, ml, objs...)
			h.settle()
			changed := strings.Contains(h.specOf("n1")[0], "3g.40gb")
			if changed == held {
				t.Errorf("n1/gpu-0 desired %q with gpu-1 held %t: want a 3g.40gb device made only while gpu-1 is free", h.specOf("n1")[0], held)
			}
		})
	}
}

// TestUnplannedDevicesOfTheNewestGeneration: while the agent republishes
// its pool, a slice of the older generation may still be listed: the
// devices the plan does not change are read from the newest one only, not
// twice (which the allocator would take for an invalid pool).
func TestUnplannedDevicesOfTheNewestGeneration(t *testing.T) {
	_, slice, _, _ := wholeGPUFixture()
	older := slice.DeepCopy()
	older.Name = "n1-mig-old"
	newer := slice.DeepCopy()
	newer.Spec.Pool.Generation = 2
	got, _ := unplannedDevices([]*resourceapi.ResourceSlice{older, newer}, migClassName, "n1",
		[]planner.GPU{{Info: migslices.PlannedGPU(mig.DefaultCatalog().Models()[0], 0)}}, nil)
	var names []string
	for _, d := range got.Spec.Devices {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"gpu-1"}, names); diff != "" {
		t.Errorf("unplanned devices (-want +got):\n%s", diff)
	}
}

// TestAutoPlansWhenWholeGPUPublishedLater: with gpu-1 held, p1 waits; the
// agent then publishes gpu-2 (free) in its slice: the next pass plans p1's
// device, as the slice's devices the plan does not change are among its
// inputs.
func TestAutoPlansWhenWholeGPUPublishedLater(t *testing.T) {
	ml, slice, objs, wholeClaim := wholeGPUFixture()
	h := newAutoCluster(t, ml, append(objs, heldWholeGPU(wholeClaim))...)
	h.settle()
	if got := h.specOf("n1")[0]; strings.Contains(got, "3g.40gb") {
		t.Fatalf("planned with gpu-1 held: %q", got)
	}
	var s resourceapi.ResourceSlice
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(slice), &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Devices = append(s.Spec.Devices, wholeGPUDevice("gpu-2"))
	if err := h.c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if got := h.specOf("n1")[0]; !strings.Contains(got, "3g.40gb") {
		t.Errorf("gpu-2 published free, but n1/gpu-0 not planned for p1 (desired %q)", got)
	}
}

// blockedCancelLostCluster is an Auto cluster where n1's change for p1 is
// blocked by a device in use and n2's GPU is whole, and where n1's agent
// starts a pass between the plan and its write (the plan's cancel of n1's
// change is not written).
func blockedCancelLostCluster(t *testing.T) *autoCluster {
	t.Helper()
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml,
		a100(0).layout("7g.80gb@0").inUse("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "serves 1 pending pod(s): ns/p1", ServedPods: []string{"ns/p1"}}}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), n1,
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.a.Client = &startsPassOnRead{Client: h.c, node: "n1"}
	return h
}
