package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// DeviceTaintRules take devices out of scheduling as the agents' own
// taints do: a device a NoSchedule or NoExecute rule names is kept as it
// is (pinned: never promised, never destroyed), one the GPU does not have
// is never made (Tainted), a node whose every device
// a rule selects is Frozen; rules of another driver or pool, of effect
// None, or without a selector change nothing.
func TestBuildSnapshotDeviceTaintRules(t *testing.T) {
	const driver = "mig.miglayout.io"
	auto := migLayout("auto").selects("pool", "a").build()
	auto.Spec.Mode, auto.Spec.Rules, auto.UID = v1alpha1.ModeAuto, nil, "uid-auto"
	owner := []metav1.OwnerReference{{APIVersion: "miglayout.io/v1alpha1", Kind: "MigLayout", Name: auto.Name, UID: auto.UID, Controller: ptr.To(true)}}
	in := AutoInputs{Driver: driver, MigLayouts: []v1alpha1.MigLayout{auto}, NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}}
	for _, n := range []string{"a1", "a2", "a3"} {
		in.Nodes = append(in.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": "a"}}})
		in.NodeMigLayouts[n] = &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: n, OwnerReferences: owner},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: auto.Name},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}}}}
	}
	right := migslices.MIGDeviceName(0, "3g.40gb", 9, 4)
	// A device a1's GPU does not have: the planner never makes it.
	seventh := migslices.MIGDeviceName(0, "1g.10gb", 19, 6)
	rule := func(effect resourceapi.DeviceTaintEffect, sel *resourceapi.DeviceTaintSelector) resourceapi.DeviceTaintRule {
		return resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: sel,
			Taint: resourceapi.DeviceTaint{Key: "maintenance", Effect: effect}}}
	}
	in.TaintRules = []resourceapi.DeviceTaintRule{
		rule(resourceapi.DeviceTaintEffectNoSchedule, &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("a1"), Device: ptr.To(right)}),
		rule(resourceapi.DeviceTaintEffectNoSchedule, &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("a1"), Device: ptr.To(seventh)}),
		rule(resourceapi.DeviceTaintEffectNoExecute, &resourceapi.DeviceTaintSelector{Pool: ptr.To("a2")}),
		// Change nothing:
		rule(resourceapi.DeviceTaintEffectNoSchedule, &resourceapi.DeviceTaintSelector{Driver: ptr.To("nic.example.com"), Pool: ptr.To("a3")}),
		rule(resourceapi.DeviceTaintEffectNone, &resourceapi.DeviceTaintSelector{Pool: ptr.To("a3")}),
		rule(resourceapi.DeviceTaintEffectNoSchedule, nil),
	}
	snap := BuildSnapshot(in, mig.DefaultCatalog())
	type nodeView struct {
		Frozen          bool
		Pinned, Tainted string
	}
	got := map[string]nodeView{}
	for _, n := range snap.Nodes {
		got[n.Node.Name] = nodeView{Frozen: n.Frozen, Pinned: n.GPUs[0].Pinned.String(), Tainted: n.GPUs[0].Tainted.String()}
	}
	want := map[string]nodeView{
		"a1": {Pinned: "3g.40gb@4", Tainted: "1g.10gb@6"},
		"a2": {Frozen: true},
		"a3": {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

// Devices the agent publishes with the Xid taint are kept as they are
// (pinned), read from the newest generation of the node's pool only, and
// nothing new is made on their GPU (Tainted), nor on a GPU whose status
// lists an Xid (MIG mode on, no device to taint); a device the status lists
// is kept as it is too, published without the taint (dropped by the API
// server).
func TestBuildSnapshotXidTainted(t *testing.T) {
	const driver = "mig.miglayout.io"
	auto := migLayout("auto").selects("pool", "a").build()
	auto.Spec.Mode, auto.Spec.Rules, auto.UID = v1alpha1.ModeAuto, nil, "uid-auto"
	owner := []metav1.OwnerReference{{APIVersion: "miglayout.io/v1alpha1", Kind: "MigLayout", Name: auto.Name, UID: auto.UID, Controller: ptr.To(true)}}
	in := AutoInputs{Driver: driver, MigLayouts: []v1alpha1.MigLayout{auto}, NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}}
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		in.Nodes = append(in.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": "a"}}})
		in.NodeMigLayouts[n] = &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: n, OwnerReferences: owner},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: auto.Name},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}}}}
	}
	a3 := &in.NodeMigLayouts["a3"].Status.GPUs[0]
	a3.Layout, a3.Xids = "", []v1alpha1.GPUXid{{Xid: 48}}
	in.NodeMigLayouts["a4"].Status.GPUs[0].Xids = []v1alpha1.GPUXid{{Xid: 94, Device: migslices.MIGDeviceName(0, "3g.40gb", 9, 4)}}
	left, right := migslices.MIGDeviceName(0, "3g.40gb", 9, 0), migslices.MIGDeviceName(0, "3g.40gb", 9, 4)
	slice := func(node string, gen int64, taint resourceapi.DeviceTaint, tainted string) resourceapi.ResourceSlice {
		s := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}}}
		for _, name := range []string{left, right} {
			d := resourceapi.Device{Name: name}
			if name == tainted {
				d.Taints = []resourceapi.DeviceTaint{taint}
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		return s
	}
	in.Slices = []resourceapi.ResourceSlice{
		slice("a1", 2, migslices.XidTaint(48), right),
		// a2's newest generation has no Xid taint; an older one had.
		slice("a2", 1, migslices.XidTaint(48), left),
		slice("a2", 2, migslices.DrainTaint(), left),
		slice("a4", 1, resourceapi.DeviceTaint{}, ""),
	}
	snap := BuildSnapshot(in, mig.DefaultCatalog())
	got := map[string]string{}
	tainted := map[string]mig.Layout{}
	for _, n := range snap.Nodes {
		got[n.Node.Name] = n.GPUs[0].Pinned.String()
		tainted[n.Node.Name] = n.GPUs[0].Tainted
	}
	if diff := cmp.Diff(map[string]string{"a1": "3g.40gb@4", "a2": "", "a3": "", "a4": "3g.40gb@4"}, got); diff != "" {
		t.Errorf("pinned devices (-want +got):\n%s", diff)
	}
	// Nothing new is made on a1's GPU nor a3's; a2's is free to change.
	for _, d := range mig.MustParseLayout("7g.80gb@0,1g.10gb@0,1g.10gb@6,4g.40gb@0,2g.20gb@4") {
		for _, n := range []string{"a1", "a3", "a4"} {
			if !tainted[n].Contains(d) {
				t.Errorf("%s's GPU, hit by an Xid, may get %s: Tainted %s", n, d, tainted[n])
			}
		}
	}
	for _, d := range mig.MustParseLayout("3g.40gb@0,3g.40gb@4") {
		if tainted["a1"].Contains(d) {
			t.Errorf("a1's GPU's own device %s is Tainted", d)
		}
	}
	if len(tainted["a2"]) > 0 {
		t.Errorf("a2's GPU Tainted %s, want none", tainted["a2"])
	}
}
