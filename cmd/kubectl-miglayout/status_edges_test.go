package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanIgnoresOtherDriversOfThePool: another DRA driver's ResourceSlices
// and allocations in a pool of the same name (the node's) are not
// miglayout's: a newer generation of them does not hide miglayout's
// devices, and a claim of theirs does not hold miglayout's device of the
// same name.
func TestPlanIgnoresOtherDriversOfThePool(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g0 := migslices.PlannedGPU(model, 0)
	var devs []resourceapi.Device
	for i := range 7 {
		d, err := migslices.PlannedMIGDevice(g0, mig.Device{Profile: "1g.10gb", Start: i})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	slice := func(name string, gen int64, devices []resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To("gpu-a"),
				Pool: resourceapi.ResourcePool{Name: "gpu-a", Generation: gen, ResourceSliceCount: 1}, Devices: devices}}
	}
	held := devs[1].Name
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "job"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: migslices.DefaultDriverName, Pool: "gpu-a", Device: held}}}}
	rules := []v1alpha1.LayoutRule{{Name: "mixed", Profiles: map[string]int32{"3g.40gb": 1, "1g.10gb": 1}}}
	inventory := []v1alpha1.GPUStatus{{Index: 0, Product: g0.ProductName, Model: model.Name, MIGEnabled: true, MIGPending: true,
		Layout: "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", InUse: "1g.10gb@1"}}
	want, _ := controller.DesiredGPUs(mig.DefaultCatalog(), rules, inventory, nil)
	if len(want) != 1 {
		t.Fatalf("controller wants %+v", want)
	}
	f := staticMigLayoutFile(t, "mixed", "[{name: mixed, profiles: {3g.40gb: 1, 1g.10gb: 1}}]")
	// NVIDIA's driver publishes the node's GPUs in a pool of the same
	// name, of a higher generation, and a claim holds one of its devices
	// named as one of miglayout's.
	other := slice("nvidia", 9, []resourceapi.Device{{Name: devs[3].Name}})
	other.Spec.Driver = "gpu.nvidia.com"
	otherClaim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "nv"}}
	otherClaim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "gpu-a", Device: devs[3].Name}}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), claim, otherClaim,
		slice("new", 2, devs), other}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "-> "+want[0].Layout) || strings.Contains(out, "blocked") {
		t.Errorf("plan does not show the controller's layout %s, unblocked:\n%s", want[0].Layout, out)
	}
}

// TestStatusShowsGPUsBlockedByTheController: a GPU the controller's row
// marks Blocked, which its agent reports Ready (the spec leaves it out), is
// shown Blocked, not Ready.
func TestStatusShowsGPUsBlockedByTheController(t *testing.T) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1", Phase: v1alpha1.PhaseBlocked,
			Message: `gpu-0: blocked`,
			GPUs:    []v1alpha1.GPURow{{Index: 0, Phase: v1alpha1.PhaseBlocked}}}}}}
	out, _, err := runWith(t, append(cluster(t), ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	node1, _, _ := strings.Cut(out, "gpu-node-2 ")
	var gpu0 string
	for _, l := range strings.Split(node1, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "gpu-0 ") {
			gpu0 = l
		}
	}
	if !strings.Contains(gpu0, " Blocked ") {
		t.Errorf("gpu-0 of gpu-node-1 shown %q, want the controller's phase Blocked:\n%s", gpu0, out)
	}
}
