package slices

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
)

// Every device any catalog model can publish (the whole GPU and every
// profile at every placement) stays inside the API limits, with room to
// spare, and a 100-character product name is cut to 64.
func TestAllCatalogDevicesWithinLimits(t *testing.T) {
	longName := "NVIDIA " + strings.Repeat("X", 93)
	for _, m := range mig.DefaultCatalog().Models() {
		for _, name := range []string{m.ProductName, longName} {
			g := PlannedGPU(m, 15)
			g.ProductName = name
			g.DriverVersion, g.CUDADriverVersion, g.PCIBusID = "580.95.05", "13.0", "00000000:b7:00.0"
			whole := GPUDevice(g)
			check(t, whole)
			for _, p := range m.Profiles {
				for _, pl := range p.Placements {
					d, err := PlannedMIGDevice(g, mig.Device{Profile: p.Name, Start: pl.Start})
					if err != nil {
						t.Fatal(err)
					}
					d.Attributes[AttrUUID] = str("MIG-" + strings.Repeat("f", 36)) // a real UUID's length
					check(t, d)
				}
			}
		}
	}
}

func check(t *testing.T, d resourceapi.Device) {
	t.Helper()
	if err := ValidateDevice(d); err != nil {
		t.Errorf("%v", err)
	}
	if n := len(d.Attributes) + len(d.Capacity); n > 24 {
		t.Errorf("%s: %d attributes and capacities, keep well under the limit of 32", d.Name, n)
	}
	if got := *d.Attributes[AttrProductName].StringValue; len(got) > 64 {
		t.Errorf("%s: productName of %d characters", d.Name, len(got))
	}
}

func TestValidateDeviceRejects(t *testing.T) {
	base := func() resourceapi.Device {
		g := PlannedGPU(mig.DefaultCatalog().Models()[0], 0)
		return GPUDevice(g)
	}
	tests := map[string]struct {
		mutate func(*resourceapi.Device)
		want   string
	}{
		"too many attributes": {func(d *resourceapi.Device) {
			for i := range 32 {
				d.Attributes[resourceapi.QualifiedName(fmt.Sprintf("extra%d", i))] = integer(1)
			}
		}, "at most 32 allowed"},
		"long string": {func(d *resourceapi.Device) {
			d.Attributes["x"] = resourceapi.DeviceAttribute{StringValue: ptr.To(strings.Repeat("a", 65))}
		}, "string value of 65 characters"},
		"bad version": {func(d *resourceapi.Device) {
			d.Attributes["v"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("580.95.05")}
		}, "not a semantic version"},
		"two values": {func(d *resourceapi.Device) {
			d.Attributes["v"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1), BoolValue: ptr.To(true)}
		}, "2 values set"},
		"bad name":     {func(d *resourceapi.Device) { d.Name = "GPU_0" }, "name:"},
		"bad attr key": {func(d *resourceapi.Device) { d.Attributes["foo-bar"] = integer(1) }, "not a C identifier"},
		"long id": {func(d *resourceapi.Device) {
			d.Attributes[resourceapi.QualifiedName(strings.Repeat("a", 33))] = integer(1)
		}, "longer than 32"},
		"bad domain": {func(d *resourceapi.Device) { d.Attributes["Foo_bar/x"] = integer(1) }, "domain"},
		"bad effect": {func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: DrainTaintKey, Effect: "PreferNoSchedule"}}
		}, "unknown effect"},
		"no value": {func(d *resourceapi.Device) {
			d.Attributes["v"] = resourceapi.DeviceAttribute{}
		}, "0 values set"},
		"long version": {func(d *resourceapi.Device) {
			d.Attributes["v"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("1.2.3+" + strings.Repeat("a", 59))}
		}, "version value of 65 characters"},
		"negative capacity": {func(d *resourceapi.Device) {
			d.Capacity["neg"] = resourceapi.DeviceCapacity{Value: resource.MustParse("-1")}
		}, "negative value -1"},
		"too many taints": {func(d *resourceapi.Device) {
			for range 17 {
				d.Taints = append(d.Taints, DrainTaint())
			}
		}, "17 taints, at most 16 allowed"},
		"long domain": {func(d *resourceapi.Device) {
			d.Attributes[resourceapi.QualifiedName(strings.Repeat("a", 64)+"/x")] = integer(1)
		}, "domain longer than 63"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := base()
			if err := ValidateDevice(d); err != nil {
				t.Fatalf("base device invalid: %v", err)
			}
			tc.mutate(&d)
			err := ValidateDevice(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), d.Name) {
				t.Errorf("ValidateDevice = %v, want an error naming %s and containing %q", err, d.Name, tc.want)
			}
		})
	}
	// The limits themselves are allowed: 32 attributes and capacities.
	d := base()
	for i := 0; len(d.Attributes)+len(d.Capacity) < 32; i++ {
		d.Attributes[resourceapi.QualifiedName(fmt.Sprintf("extra%d", i))] = integer(1)
	}
	if err := ValidateDevice(d); err != nil {
		t.Errorf("a device of 32 attributes and capacities: %v", err)
	}
	for _, n := range []string{DefaultDriverName, "gpu.nvidia.com"} {
		if err := ValidateDriverName(n); err != nil {
			t.Error(err)
		}
	}
	for _, n := range []string{"Mig.example.com", "", strings.Repeat("a", 64)} {
		if err := ValidateDriverName(n); err == nil {
			t.Errorf("ValidateDriverName(%q) accepted", n)
		}
	}
}

// fakeDevices returns n MIG-like devices named dev-<i>, the first tainted
// ones carrying the drain taint.
func fakeDevices(n, tainted int) []resourceapi.Device {
	out := make([]resourceapi.Device, n)
	for i := range out {
		out[i] = resourceapi.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{AttrType: str(TypeMIG)}}
		if i < tainted {
			out[i].Taints = []resourceapi.DeviceTaint{DrainTaint()}
		}
	}
	return out
}

func TestSplitPool(t *testing.T) {
	tests := []struct {
		n, tainted int
		want       []int
	}{
		{0, 0, []int{0}},
		{7, 0, []int{7}},
		{128, 0, []int{128}},
		{129, 0, []int{128, 1}},
		{300, 0, []int{128, 128, 44}},
		{64, 64, []int{64}},
		{65, 1, []int{64, 1}},
		{128, 1, []int{64, 64}},
	}
	for _, tc := range tests {
		res, err := BuildPoolFromDevices("node-a", fakeDevices(tc.n, tc.tainted))
		if err != nil {
			t.Fatalf("%d devices, %d tainted: %v", tc.n, tc.tainted, err)
		}
		var got []int
		for _, s := range res.Pools["node-a"].Slices {
			got = append(got, len(s.Devices))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d devices, %d tainted: slice sizes %v, want %v", tc.n, tc.tainted, got, tc.want)
		}
	}
	// ValidatePool catches what SplitDevices avoids.
	for _, tc := range []struct {
		pool resourceslice.Pool
		want string
	}{
		{resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: fakeDevices(129, 0)}}}, "129 devices, at most 128"},
		{resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: fakeDevices(65, 1)}}}, "65 devices, at most 64"},
		{resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: fakeDevices(2, 0)}, {Devices: fakeDevices(1, 0)}}}, `device "dev-0" published twice`},
		{resourceslice.Pool{}, "no slice"},
	} {
		if err := ValidatePool("node-a", tc.pool); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidatePool = %v, want %q", err, tc.want)
		}
	}
}

func TestDrainTaint(t *testing.T) {
	inv, _ := simInventory(t, "1xA100-SXM4-80GB", map[int]string{0: a100Layout})
	draining := sets.New("gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3")
	res, err := BuildPool("node-a", inv.GPUs, inv.MIGs, draining)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Pools["node-a"].Slices[0].Devices {
		want := 0
		if draining.Has(d.Name) {
			want = 1
		}
		if len(d.Taints) != want {
			t.Errorf("%s: %d taints, want %d", d.Name, len(d.Taints), want)
		}
		for _, tt := range d.Taints {
			if tt.Key != DrainTaintKey || tt.Effect != resourceapi.DeviceTaintEffectNoSchedule {
				t.Errorf("%s: taint %+v", d.Name, tt)
			}
		}
	}
}

// TestXidTaint: BuildTaintedPool puts the given taints after the drain
// taint, on the devices named only.
func TestXidTaint(t *testing.T) {
	inv, _ := simInventory(t, "1xA100-SXM4-80GB", map[int]string{0: a100Layout})
	const hit, both = "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"
	taints := map[string][]resourceapi.DeviceTaint{hit: {XidTaint(48)}, both: {XidTaint(94)}}
	res, err := BuildTaintedPool("node-a", inv.GPUs, inv.MIGs, sets.New(both), taints)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]resourceapi.DeviceTaint{}
	for _, d := range res.Pools["node-a"].Slices[0].Devices {
		if len(d.Taints) > 0 {
			got[d.Name] = d.Taints
		}
	}
	xid := func(v string) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: XidTaintKey, Value: v, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	want := map[string][]resourceapi.DeviceTaint{hit: {xid("48")}, both: {DrainTaint(), xid("94")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if err := ValidatePool("node-a", res.Pools["node-a"]); err != nil {
		t.Errorf("tainted pool invalid: %v", err)
	}
}

// Publishing through the resourceslice controller (the one the kubeletplugin
// helper runs), against a fake clientset: a one-slice pool changes in one
// update of the same object at the same generation; a pool split over
// several slices changes through a generation bump. The real apiserver and
// scheduler side is in test/e2e/inventory_test.go.
func TestControllerAtomicity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-a-uid"}}
	client := fake.NewClientset(node)
	var seq, updates, creates atomic.Int64
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, seq.Add(1))
		}
		s.ResourceVersion = fmt.Sprint(seq.Add(1))
		creates.Add(1)
		return false, nil, nil
	})
	client.PrependReactor("update", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.UpdateAction).GetObject().(*resourceapi.ResourceSlice)
		s.ResourceVersion = fmt.Sprint(seq.Add(1))
		updates.Add(1)
		return false, nil, nil
	})
	inv, m := simInventory(t, "1xA100-SXM4-80GB", map[int]string{0: a100Layout})
	res, err := BuildPool("node-a", inv.GPUs, inv.MIGs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: DefaultDriverName,
		KubeClient: client,
		Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: "node-a"},
		Resources:  &res,
		SyncDelay:  ptr.To(time.Duration(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Stop()

	list := func() []resourceapi.ResourceSlice {
		l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	waitFor := func(what string, cond func([]resourceapi.ResourceSlice) bool) []resourceapi.ResourceSlice {
		t.Helper()
		var got []resourceapi.ResourceSlice
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got = list()
			return cond(got), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v; slices: %+v", what, err, got)
		}
		return got
	}
	devNames := func(ss []resourceapi.ResourceSlice) sets.Set[string] {
		out := sets.New[string]()
		for _, s := range ss {
			for _, d := range s.Spec.Devices {
				out.Insert(d.Name)
			}
		}
		return out
	}
	first := waitFor("the first slice", func(ss []resourceapi.ResourceSlice) bool { return len(ss) == 1 })[0]
	if first.Spec.Pool.Name != "node-a" || ptr.Deref(first.Spec.NodeName, "") != "node-a" || first.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("slice pool %+v node %v", first.Spec.Pool, first.Spec.NodeName)
	}
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].UID != "node-a-uid" {
		t.Errorf("owner references %+v, want the Node", first.OwnerReferences)
	}

	// Layout change: 1g.10gb@2,1g.10gb@3 -> 2g.20gb@2.
	for _, d := range mig.MustParseLayout("1g.10gb@2,1g.10gb@3") {
		if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "2g.20gb", Start: 2}); err != nil {
		t.Fatal(err)
	}
	inv2, err := ReadInventory(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	creates0, updates0 := creates.Load(), updates.Load()
	if err := Publish(ctx, ControllerPublisher{ctrl}, "node-a", inv2, nil); err != nil {
		t.Fatal(err)
	}
	want := sets.New("gpu-0-mig-2g20gb-14-0", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-3g40gb-9-4")
	second := waitFor("the new layout", func(ss []resourceapi.ResourceSlice) bool { return devNames(ss).Equal(want) })
	if len(second) != 1 || second[0].Name != first.Name || second[0].ResourceVersion == first.ResourceVersion ||
		second[0].Spec.Pool.Generation != first.Spec.Pool.Generation {
		t.Errorf("one-slice pool change: before %s rv %s gen %d, after %d slices, first %s rv %s gen %d; want one update of the same object, same generation",
			first.Name, first.ResourceVersion, first.Spec.Pool.Generation, len(second), second[0].Name, second[0].ResourceVersion, second[0].Spec.Pool.Generation)
	}
	if c, u := creates.Load()-creates0, updates.Load()-updates0; c != 0 || u != 1 {
		t.Errorf("layout change made %d creates and %d updates, want 0 and 1", c, u)
	}

	// A pool too big for one slice: several slices, and every change of
	// more than one of them bumps the generation.
	big, err := BuildPoolFromDevices("node-a", fakeDevices(200, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctrl.Update(&big)
	third := waitFor("the split pool", func(ss []resourceapi.ResourceSlice) bool { return devNames(ss).Len() == 200 && len(ss) == 2 })
	gen := third[0].Spec.Pool.Generation
	for _, s := range third {
		if s.Spec.Pool.Generation != gen || s.Spec.Pool.ResourceSliceCount != 2 {
			t.Errorf("split slice %s: pool %+v", s.Name, s.Spec.Pool)
		}
	}
	if gen <= second[0].Spec.Pool.Generation {
		t.Errorf("growing to two slices kept generation %d", gen)
	}
	changed := fakeDevices(200, 0)
	changed[0].Name, changed[199].Name = "dev-x", "dev-y" // one device in each slice
	big2, err := BuildPoolFromDevices("node-a", changed)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.Update(&big2)
	fourth := waitFor("the changed split pool", func(ss []resourceapi.ResourceSlice) bool { return devNames(ss).HasAll("dev-x", "dev-y") })
	for _, s := range fourth {
		if s.Spec.Pool.Generation != gen+1 {
			t.Errorf("changing two slices of a split pool: slice %s generation %d, want %d", s.Name, s.Spec.Pool.Generation, gen+1)
		}
	}
}
