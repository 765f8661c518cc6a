package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

func TestBatcher(t *testing.T) {
	t0 := time.Unix(0, 0)
	idle, max := 2*time.Second, 10*time.Second
	type step struct {
		at   time.Duration
		key  string
		want time.Duration // ≤ 0: plan now
	}
	tests := map[string][]step{
		"quiet inputs are planned after the idle period": {
			{0, "a", 2 * time.Second}, {time.Second, "a", time.Second}, {2 * time.Second, "a", 0},
			{3 * time.Second, "a", time.Hour}, // planned already
		},
		"changing inputs are planned at the latest after max": {
			{0, "a", 2 * time.Second}, {time.Second, "b", 2 * time.Second}, {2 * time.Second, "c", 2 * time.Second},
			{9 * time.Second, "d", time.Second}, {10 * time.Second, "e", 0},
		},
		"inputs back to what was planned close the batch: the next change waits again": {
			{0, "a", 2 * time.Second}, {2 * time.Second, "a", 0}, {3 * time.Second, "b", 2 * time.Second},
			{4 * time.Second, "a", time.Hour}, {20 * time.Second, "c", 2 * time.Second},
		},
		"a new change after a plan starts a new batch": {
			{0, "a", 2 * time.Second}, {2 * time.Second, "a", 0}, {5 * time.Second, "b", 2 * time.Second}, {7 * time.Second, "b", 0},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			var b batcher
			for i, s := range steps {
				got := b.observe(s.key, t0.Add(s.at), idle, max)
				if (s.want <= 0) != (got <= 0) || s.want > 0 && got != s.want {
					t.Errorf("step %d (%v, %q): wait %v, want %v", i, s.at, s.key, got, s.want)
				}
			}
		})
	}
	// A plan that failed is forgotten: the same inputs are planned again on the retry.
	var a AutoPlanner
	if got := a.batch.observe("a", t0, 0, max); got > 0 {
		t.Fatalf("first observation waits %v, want a plan now", got)
	}
	a.forget()
	if got := a.batch.observe("a", t0.Add(time.Second), 0, max); got > 0 {
		t.Errorf("after forget the same inputs wait %v, want a plan now", got)
	}
}

func TestBuildSnapshot(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.Spec.Mode = v1alpha1.ModeAuto
	auto.Spec.Rules = nil
	auto.Spec.Policy = &v1alpha1.AutoPolicy{AllowedProfiles: []v1alpha1.ProfileName{"3g.40gb", "1g.10gb"}, MaxGPUsPerNode: 2, MaxGPUs: 3}
	auto.UID = "uid-auto"
	static := migLayout("static").selects("pool", "b").build()
	ctrlRef := func(ml *v1alpha1.MigLayout) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "miglayout.io/v1alpha1", Kind: "MigLayout", Name: ml.Name, UID: ml.UID, Controller: ptr.To(true)}}
	}
	nml := func(name string, owner *v1alpha1.MigLayout, spec []v1alpha1.GPUSpec, st ...v1alpha1.GPUStatus) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: ctrlRef(owner)},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: owner.Name, GPUs: spec}, Status: v1alpha1.NodeMigLayoutStatus{GPUs: st}}
	}
	gst := func(idx int32, layout, inUse string, phase v1alpha1.GPUPhase) v1alpha1.GPUStatus {
		return v1alpha1.GPUStatus{Index: idx, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true, Layout: layout, InUse: inUse, Phase: phase}
	}
	// GPU 3's change was blocked: a device it destroys was allocated after the plan, and
	// the agent has not reported it in use yet; the claim's allocation pins it.
	blocked := gst(3, "2g.20gb@0,2g.20gb@2,3g.40gb@4", "", v1alpha1.PhaseBlocked)
	blocked.Reason, blocked.Message = v1alpha1.ReasonDeviceInUse, "2g.20gb@0 is allocated"
	unsched := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	in := AutoInputs{
		Driver:     "mig.miglayout.io",
		MigLayouts: []v1alpha1.MigLayout{auto, static},
		Nodes: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a1", Labels: map[string]string{"pool": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b1", Labels: map[string]string{"pool": "b"}}},
		},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"a1": nml("a1", &auto, []v1alpha1.GPUSpec{{Index: 1, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}, {Index: 3, MIGEnabled: true, Layout: "7g.80gb@0"}},
				gst(0, "7g.80gb@0", "", v1alpha1.PhaseReady), gst(1, "7g.80gb@0", "", v1alpha1.PhaseDraining), gst(2, "3g.40gb@0", "3g.40gb@0", v1alpha1.PhaseReady), blocked),
			"b1": nml("b1", &static, nil, gst(0, "7g.80gb@0", "", v1alpha1.PhaseReady)),
		},
		Pods: []corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "templated", UID: "uid-templated"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}},
				Status: corev1.PodStatus{Conditions: unsched, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("templated-gpu-x")}}}},
			// Its status names a claim made for an earlier pod of its name: kube-scheduler
			// refuses it until the claim is made for it.
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "templated-stale", UID: "uid-templated-stale"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}},
				Status: corev1.PodStatus{Conditions: unsched, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("templated-stale-gpu-y")}}}},
			// Its template entry's claim is not made yet.
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "templated-not-made"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "not-yet-tried"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "allocated"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c2")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-missing"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("nope")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
			// Its NIC claim is allocated on a1: it may only go there.
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "half-allocated"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimName: ptr.To("c4")}, {Name: "nic", ResourceClaimName: ptr.To("nic-on-a1")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
			// Its status says the template entry needed no claim: the entry is ignored.
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one-not-needed"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimName: ptr.To("c5")}, {Name: "extra", ResourceClaimTemplateName: ptr.To("t")}}},
				Status: corev1.PodStatus{Conditions: unsched, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "extra"}}}},
			// It shares c1 with waits: both are pending (the planner serves c1 once).
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-shares-c1", CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
				Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
		},
		Claims: map[types.NamespacedName]*resourceapi.ResourceClaim{
			{Namespace: "ns", Name: "c1"}:                    {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}},
			{Namespace: "ns", Name: "c4"}:                    {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c4"}},
			{Namespace: "ns", Name: "c5"}:                    {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c5"}},
			{Namespace: "ns", Name: "templated-gpu-x"}:       {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "templated-gpu-x", OwnerReferences: podOwner("templated", "uid-templated")}},
			{Namespace: "ns", Name: "templated-stale-gpu-y"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "templated-stale-gpu-y", OwnerReferences: podOwner("templated-stale", "uid-earlier")}},
			{Namespace: "ns", Name: "c2"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c2"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{
						{Request: "gpu", Driver: "mig.miglayout.io", Pool: "a1", Device: "gpu-2-mig-3g40gb-9-0"},
						{Request: "nic", Driver: "nic.example.com", Pool: "a1", Device: "nic-1"},
					}}}}},
			{Namespace: "ns", Name: "nic-on-a1"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nic-on-a1"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{NodeSelector: poolSelector("a"),
					Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
						{Request: "nic", Driver: "nic.example.com", Pool: "a1", Device: "nic-0"}}}}}},
			{Namespace: "ns", Name: "c3"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c3"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "mig.miglayout.io", Pool: "a1", Device: "gpu-3-mig-2g20gb-14-0"}}}}}},
		},
		Slices: []resourceapi.ResourceSlice{
			{ObjectMeta: metav1.ObjectMeta{Name: "a1-mig"}, Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io", NodeName: ptr.To("a1")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "a1-nic"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("a1"), Pool: nicPool("a1", 1)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b1-nic"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("b1"), Pool: nicPool("b1", 1)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", AllNodes: ptr.To(true), Pool: nicPool("fabric", 1)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rack-a"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeSelector: poolSelector("a"), Pool: nicPool("rack-a", 1)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rack-b"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeSelector: poolSelector("b"), Pool: nicPool("rack-b", 1)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "per-device"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", PerDeviceNodeSelection: ptr.To(true), Pool: nicPool("per-device", 1)}},
			// One pool in a slice per rack.
			{ObjectMeta: metav1.ObjectMeta{Name: "spine-a"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeSelector: poolSelector("a"), Pool: nicPool("spine", 2)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "spine-b"}, Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeSelector: poolSelector("b"), Pool: nicPool("spine", 2)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "shared-mig"}, Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io", AllNodes: ptr.To(true)}},
		},
	}
	snap := BuildSnapshot(in, mig.DefaultCatalog())
	for _, n := range snap.Nodes {
		var names []string
		for _, s := range n.OtherSlices {
			names = append(names, s.Name)
		}
		// Its own, all nodes', its rack's, and per-device selection (the
		// allocator checks those): not another node's, another rack's, or
		// miglayout's own; with a slice it reaches, the other slices of its
		// pool (the allocator counts them to see the pool complete, as
		// kube-scheduler's does).
		if diff := cmp.Diff([]string{"a1-nic", "fabric", "rack-a", "per-device", "spine-a", "spine-b"}, names); diff != "" {
			t.Errorf("node %s: other drivers' slices (-want +got):\n%s", n.Node.Name, diff)
		}
	}
	var allocated []string
	for _, id := range snap.OtherHeld.Devices {
		allocated = append(allocated, id.String())
	}
	sort.Strings(allocated) // a set
	if diff := cmp.Diff([]string{structured.MakeDeviceID("nic.example.com", "a1", "nic-0").String(),
		structured.MakeDeviceID("nic.example.com", "a1", "nic-1").String()}, allocated); diff != "" {
		t.Errorf("other drivers' allocated devices (-want +got):\n%s", diff)
	}
	type gpuRow struct {
		Node, Layout, Pinned string
		Index                int
		Changing             bool
	}
	var gotGPUs []gpuRow
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			gotGPUs = append(gotGPUs, gpuRow{n.Node.Name, g.Layout.String(), g.Pinned.String(), g.Info.Index, g.Changing})
		}
		if diff := cmp.Diff([]string{"3g.40gb", "1g.10gb"}, n.Policy.AllowedProfiles); diff != "" || n.Policy.MaxGPUsPerNode != 2 {
			t.Errorf("policy %+v", n.Policy)
		}
	}
	wantGPUs := []gpuRow{
		{"a1", "7g.80gb@0", "", 0, false},
		{"a1", "3g.40gb@0,3g.40gb@4", "", 1, true}, // desired while it changes
		{"a1", "3g.40gb@0", "3g.40gb@0", 2, false},
		{"a1", "2g.20gb@0,2g.20gb@2,3g.40gb@4", "2g.20gb@0", 3, true}, // blocked: its change is cancelled, not counted on
	}
	if diff := cmp.Diff(wantGPUs, gotGPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
	var pods []string
	for _, p := range snap.Pending {
		pods = append(pods, fmt.Sprintf("%s claims=%d allocatedOn=%d", p.Pod.Name, len(p.Claims), len(p.AllocatedOn)))
	}
	if diff := cmp.Diff([]string{"waits claims=1 allocatedOn=0", "templated claims=1 allocatedOn=0",
		"half-allocated claims=1 allocatedOn=1", "one-not-needed claims=1 allocatedOn=0", "a-shares-c1 claims=1 allocatedOn=0"}, pods); diff != "" {
		t.Errorf("pending pods (-want +got):\n%s", diff)
	}
	// The blocked change is cancelled.
	var cancels []string
	for _, c := range BlockedChanges(in, snap) {
		cancels = append(cancels, fmt.Sprintf("%s/%d: %s -> %s", c.Node, c.GPU, c.From, c.To))
	}
	if diff := cmp.Diff([]string{"a1/3: 7g.80gb@0 -> 2g.20gb@0,2g.20gb@2,3g.40gb@4"}, cancels); diff != "" {
		t.Errorf("cancelled changes (-want +got):\n%s", diff)
	}
	// policy.maxGPUs limits the MigLayout's own nodes, not the cluster.
	if diff := cmp.Diff(map[string]int{"auto": 3}, snap.GroupMaxGPUs); diff != "" {
		t.Errorf("group limits (-want +got):\n%s", diff)
	}
	for _, n := range snap.Nodes {
		if n.Policy.Group != "auto" {
			t.Errorf("node %s in group %q, want auto", n.Node.Name, n.Policy.Group)
		}
	}
	// A spare count of 0 keeps no spare: the nodes' policies name none, so
	// their idle GPUs are given back whole as on nodes without spares.
	in.MigLayouts[0].Spec.Policy.Spares = map[string]int32{"1g.10gb": 0}
	for _, n := range BuildSnapshot(in, mig.DefaultCatalog()).Nodes {
		if n.Policy.Spares != nil {
			t.Errorf("node %s keeps spares %v for a count of 0, want none", n.Node.Name, n.Policy.Spares)
		}
	}
	// A node whose agent is lost is frozen (its GPUs changing still count
	// toward maxGPUs) and keeps no spares; its pods stay pending.
	in.LostAgents = sets.New("a1")
	in.MigLayouts[0].Spec.Policy.Spares = map[string]int32{"1g.10gb": 1}
	lost := BuildSnapshot(in, mig.DefaultCatalog())
	if len(lost.Nodes) != 1 || !lost.Nodes[0].Frozen || lost.Nodes[0].Policy.Spares != nil || len(lost.Nodes[0].GPUs) != 4 || len(lost.Pending) != len(snap.Pending) {
		t.Errorf("a1's agent lost: nodes %+v, %d pending pods; want a1 frozen with its 4 GPUs, no spares, and %d pods", lost.Nodes, len(lost.Pending), len(snap.Pending))
	}
	// Nor is its blocked change cancelled: nothing is written for it.
	if c := BlockedChanges(in, lost); len(c) != 0 {
		t.Errorf("cancels written for a1 while its agent is lost: %+v", c)
	}
}

func TestNotify(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	}
	model, _ := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	changing := planner.GPU{Info: migslices.PlannedGPU(model, 1), Layout: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Changing: true}
	snap := planner.Snapshot{
		Nodes:   []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, GPUs: []planner.GPU{changing}}},
		Pending: []planner.Pod{{Pod: pod("new")}, {Pod: pod("coming")}, {Pod: pod("ready")}, {Pod: pod("never")}, {Pod: pod("later")}, {Pod: pod("small")}, {Pod: pod("sharing")}, {Pod: pod("on-lost")}},
	}
	res := planner.Result{
		Changes: []planner.Change{{Node: "n1", GPU: 0, To: mig.MustParseLayout("7g.80gb@0"), Serves: []string{"ns/new"}}},
		Served: []planner.Placement{
			{Pod: "ns/new", Node: "n1", Devices: []string{"gpu-0-mig-7g80gb-0-0"}, NeedsChange: true},
			{Pod: "ns/coming", Node: "n1", Devices: []string{"gpu-1-mig-3g40gb-9-4"}},
			{Pod: "ns/ready", Node: "n1", Devices: []string{"gpu-2-mig-1g10gb-19-0"}},
		},
		Unservable: map[string]string{"ns/never": "no profile satisfies claim c", "ns/small": planner.NoRoom, "ns/sharing": planner.WaitsForSharedClaim,
			"ns/on-lost": planner.WaitsForLostNode},
		Kept: map[string]planner.Kept{"ns/later": {Node: "n1", GPU: 3, Profile: "4g.40gb", Placement: mig.Placement{Start: 0, Size: 4}}},
	}
	rec := events.NewFakeRecorder(20)
	a := &AutoPlanner{Recorder: rec}
	a.notify(AutoInputs{}, snap, res)
	a.notify(AutoInputs{}, snap, res) // the same outcome is not recorded twice
	// A pod deleted and made again under the same name hears again.
	snap.Pending[3].Pod = pod("never")
	snap.Pending[3].Pod.UID = "uid-never-again"
	a.notify(AutoInputs{}, snap, res)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	sort.Strings(got)
	want := []string{
		"Normal WaitingForCapacity no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows; it takes the first room that frees up",
		"Normal WaitingForCapacity no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows; memory slices 0-3 of n1/gpu-3 (where a 4g.40gb goes) are kept for it: miglayout makes no device there for another pod (kube-scheduler may still give one a device free there already)",
		"Normal WaitingForCapacity " + planner.WaitsForLostNode,
		"Normal WaitingForRepartition waiting for the repartition of n1/gpu-0: 7g.80gb@0 (a device such as gpu-0-mig-7g80gb-0-0)",
		"Normal WaitingForRepartition waiting for the repartition of n1/gpu-1: 3g.40gb@0,3g.40gb@4 (a device such as gpu-1-mig-3g40gb-9-4)",
		"Normal WaitingForSharedClaim " + planner.WaitsForSharedClaim,
		"Warning NotServableByAutoMode no profile satisfies claim c",
		"Warning NotServableByAutoMode no profile satisfies claim c",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestNextAging(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pending := func(ages ...time.Duration) []planner.Pod {
		var out []planner.Pod
		for _, a := range ages {
			out = append(out, planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-a))}}})
		}
		return out
	}
	tests := map[string]struct {
		snap planner.Snapshot
		want time.Duration
	}{
		"the pod closest to its aging time": {
			snap: planner.Snapshot{Now: now, AgingAfter: time.Hour, Pending: pending(10*time.Minute, 50*time.Minute, 2*time.Hour)},
			want: 10 * time.Minute,
		},
		"every pod has aged already": {snap: planner.Snapshot{Now: now, AgingAfter: time.Hour, Pending: pending(2 * time.Hour)}},
		"aging off":                  {snap: planner.Snapshot{Now: now, Pending: pending(time.Minute)}},
		// The API server's clock runs ahead of the controller's.
		"aging off, a pod stamped ahead": {snap: planner.Snapshot{Now: now, Pending: pending(-time.Minute)}},
		"no clock":                       {snap: planner.Snapshot{AgingAfter: time.Hour, Pending: pending(time.Minute)}},
		"no pending pod":                 {snap: planner.Snapshot{Now: now, AgingAfter: time.Hour}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nextAging(tc.snap); got != tc.want {
				t.Errorf("nextAging = %v, want %v", got, tc.want)
			}
		})
	}
	for in, want := range map[time.Duration]time.Duration{0: planner.DefaultAgingAfter, -1: 0, 5 * time.Minute: 5 * time.Minute} {
		if got := (&AutoPlanner{AgingAfter: in}).agingAfter(); got != want {
			t.Errorf("AgingAfter %v: agingAfter() = %v, want %v", in, got, want)
		}
	}
}

// poolSelector selects the nodes labelled pool=value.
func poolSelector(value string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}
}

// TestInputKey: the fingerprint does not depend on the order the cache lists objects in,
// and changes with a MigLayout's mode (which decides whose status.auto a plan fills).
func TestInputKey(t *testing.T) {
	a, b := migLayout("a").build(), migLayout("b").build()
	a.Spec.Mode, b.Spec.Mode = v1alpha1.ModeAuto, v1alpha1.ModeStatic
	p1 := planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", ResourceVersion: "1"}}}
	p2 := planner.Pod{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2", ResourceVersion: "2"}}}
	key := func(mls []v1alpha1.MigLayout, pods ...planner.Pod) string {
		return inputKey(AutoInputs{MigLayouts: mls}, planner.Snapshot{Pending: pods})
	}
	base := key([]v1alpha1.MigLayout{a, b}, p1, p2)
	if got := key([]v1alpha1.MigLayout{b, a}, p2, p1); got != base {
		t.Error("the same inputs listed in another order give another key")
	}
	b.Spec.Mode = v1alpha1.ModeAuto
	if got := key([]v1alpha1.MigLayout{a, b}, p1, p2); got == base {
		t.Error("a MigLayout switched to Auto mode gives the same key")
	}
	// A pod that starts to be planned by age changes the plan: the key
	// changes then; and every eventRepeat while pods wait (their events are
	// recorded again), not otherwise.
	p1.Pod.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
	at := func(d time.Duration) string {
		return inputKey(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{p1}, Now: time.Unix(0, 0).Add(d), AgingAfter: 50 * time.Minute})
	}
	if at(49*time.Minute) != at(41*time.Minute) || at(51*time.Minute) == at(49*time.Minute) {
		t.Error("the key does not change exactly when a pending pod ages")
	}
	if at(59*time.Minute) != at(51*time.Minute) || at(61*time.Minute) == at(59*time.Minute) || at(79*time.Minute) != at(61*time.Minute) {
		t.Errorf("the key does not change exactly every %s while pods wait", eventRepeat)
	}
	if got := nextRefresh(planner.Snapshot{Pending: []planner.Pod{p1}, Now: time.Unix(0, 0).Add(61 * time.Minute)}); got != 19*time.Minute {
		t.Errorf("nextRefresh at 61m = %s, want 19m", got)
	}
	if got := nextRefresh(planner.Snapshot{Now: time.Unix(0, 0)}); got != 0 {
		t.Errorf("nextRefresh with no pod pending = %s, want 0", got)
	}
	// So do node labels and taints (feasibility) and DeviceClasses.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}}
	withNode := func() string {
		return inputKey(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{p2}, Nodes: []planner.Node{{Node: n}}})
	}
	k0 := withNode()
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	if withNode() == k0 {
		t.Error("a taint on an Auto node gives the same key")
	}
	// A label no pending pod selects on (one rewritten every minute by an agent) does
	// not; one it selects on does.
	k1 := withNode()
	n.Labels["nvidia.com/gfd.timestamp"] = "1764480000"
	if withNode() != k1 {
		t.Error("a label no pod selects on changes the key")
	}
	p2.Pod.Spec.NodeSelector = map[string]string{"pool": "a"}
	k2 := withNode()
	n.Labels["pool"] = "b"
	if withNode() == k2 {
		t.Error("a label a pending pod selects on gives the same key")
	}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}}
	kc := inputKey(AutoInputs{Classes: []*resourceapi.DeviceClass{class}}, planner.Snapshot{})
	class.Generation = 2
	if inputKey(AutoInputs{Classes: []*resourceapi.DeviceClass{class}}, planner.Snapshot{}) == kc {
		t.Error("a changed DeviceClass gives the same key")
	}
	// A DeviceTaintRule (its taints on other drivers' devices change no slice).
	rule := resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "r1", Generation: 1}}
	if inputKey(AutoInputs{TaintRules: []resourceapi.DeviceTaintRule{rule}}, planner.Snapshot{}) == inputKey(AutoInputs{}, planner.Snapshot{}) {
		t.Error("a DeviceTaintRule added gives the same key")
	}
	// A pending pod's claim created again under the same name, another driver's device
	// released, and a device of miglayout's pinned by an allocation change it too.
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1"}}
	withClaim := planner.Pod{Pod: p1.Pod, Claims: []*resourceapi.ResourceClaim{claim}}
	kClaim := inputKey(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{withClaim}})
	claim.UID = "u2"
	if inputKey(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{withClaim}}) == kClaim {
		t.Error("a claim created again gives the same key")
	}
	nic := structured.MakeDeviceID("nic.example.com", "n1", "nic-0")
	if inputKey(AutoInputs{}, planner.Snapshot{OtherHeld: planner.OtherHolds{Devices: []structured.DeviceID{nic}}}) == inputKey(AutoInputs{}, planner.Snapshot{}) {
		t.Error("another driver's device released gives the same key")
	}
	pinned := func(l string) string {
		return inputKey(AutoInputs{}, planner.Snapshot{Nodes: []planner.Node{{Node: n, GPUs: []planner.GPU{
			{Info: gpu.GPU{Index: 0}, Layout: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Pinned: mig.MustParseLayout(l)}}}}})
	}
	if pinned("3g.40gb@0") == pinned("") {
		t.Error("a device pinned by an allocation gives the same key")
	}
	releasing := func(l string) string {
		return inputKey(AutoInputs{}, planner.Snapshot{Nodes: []planner.Node{{Node: n, GPUs: []planner.GPU{
			{Info: gpu.GPU{Index: 0}, Layout: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Pinned: mig.MustParseLayout("3g.40gb@0"), Releasing: mig.MustParseLayout(l)}}}}})
	}
	if releasing("3g.40gb@0") == releasing("") {
		t.Error("a device whose pod starts terminating gives the same key")
	}
	shared := func(l string) string {
		return inputKey(AutoInputs{}, planner.Snapshot{Nodes: []planner.Node{{Node: n, GPUs: []planner.GPU{
			{Info: gpu.GPU{Index: 0}, Layout: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Shared: mig.MustParseLayout(l)}}}}})
	}
	if shared("3g.40gb@0") == shared("") {
		t.Error("a device held with admin access only (allocated or released) gives the same key")
	}
	// A pod outside the demand that waits for a change in flight keeps
	// that change: bound (or deleted, or found unschedulable again), it
	// changes what the plan cancels, and the key.
	inFlight := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, ServedPods: []string{"ns/w"}}}}}
	waitsFor := func(nodeName string) string {
		w := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: corev1.PodSpec{NodeName: nodeName}}
		return inputKey(AutoInputs{Pods: []corev1.Pod{w}, NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": inFlight}}, planner.Snapshot{})
	}
	if waitsFor("") == waitsFor("n1") {
		t.Error("a pod waiting for a change in flight, then bound, gives the same key")
	}
}

// TestAllocatedDevicesPinned: devices that claims hold are pinned, those
// of the layout a GPU has and, while it changes, those of the layout it is
// getting (the agent published them and the scheduler allocated one before
// the agent's status says the change is done); a change NVML failed is
// planned with its actual layout, so only its devices count. A device is
// known by GPU, profile and placement, whatever GI profile ID its name
// carries.
func TestAllocatedDevicesPinned(t *testing.T) {
	const half = "gpu-0-mig-3g40gb-9-4"
	for name, tc := range map[string]struct {
		phase      v1alpha1.GPUPhase
		reason     string
		allocated  []string
		wantLayout string
		wantPinned string
	}{
		"coming device allocated":          {v1alpha1.PhaseRepartitioning, "Repartitioning", []string{half}, "3g.40gb@0,3g.40gb@4", "3g.40gb@4"},
		"nothing allocated":                {v1alpha1.PhaseRepartitioning, "Repartitioning", nil, "3g.40gb@0,3g.40gb@4", ""},
		"the device it has allocated":      {v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, []string{"gpu-0-mig-7g80gb-0-0"}, "7g.80gb@0", "7g.80gb@0"},
		"failed change: not coming at all": {v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, []string{half}, "7g.80gb@0", ""},
		// Published names carry NVML's GI profile ID, which may differ
		// from the catalog's (here 9 for 3g.40gb, 0 for 7g.80gb) where
		// the agent could not read NVML's profile table.
		"coming device allocated under NVML's GI profile ID": {v1alpha1.PhaseRepartitioning, "Repartitioning", []string{"gpu-0-mig-3g40gb-21-4"}, "3g.40gb@0,3g.40gb@4", "3g.40gb@4"},
		"the device it has, under NVML's GI profile ID":      {v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, []string{"gpu-0-mig-7g80gb-30-0"}, "7g.80gb@0", "7g.80gb@0"},
		"another placement's device allocated":               {v1alpha1.PhaseRepartitioning, "Repartitioning", []string{"gpu-0-mig-3g40gb-9-0", "gpu-1-mig-3g40gb-9-4"}, "3g.40gb@0,3g.40gb@4", "3g.40gb@0"},
	} {
		t.Run(name, func(t *testing.T) {
			nml := nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
				status(a100(0).layout("7g.80gb@0").phase(tc.phase, tc.reason, "")).build()
			gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, sets.New(tc.allocated...), nil, false)
			if len(gpus) != 1 {
				t.Fatalf("%d GPUs", len(gpus))
			}
			if got := gpus[0].Layout.String(); got != tc.wantLayout {
				t.Errorf("layout %s, want %s", got, tc.wantLayout)
			}
			if got := gpus[0].Pinned.String(); got != tc.wantPinned {
				t.Errorf("pinned %q, want %q", got, tc.wantPinned)
			}
		})
	}
}

// TestNotifyCutsLongNotes: a pod's event note longer than an Event may
// carry (an allocator error quoting a long CEL selector) is cut to 1 kB, so
// the API server does not refuse the event.
func TestNotifyCutsLongNotes(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	a := &AutoPlanner{Recorder: rec}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}}
	why := "evaluating the selector: " + strings.Repeat("device.attributes['mig.miglayout.io'].memory >= 1 && ", 60)
	a.notify(AutoInputs{}, planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}, planner.Result{Unservable: map[string]string{"ns/p": why}})
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, EventNotServable) || len(e) > len("Warning "+EventNotServable+" ")+maxEventNote || !strings.HasSuffix(e, "...") {
			t.Errorf("event of %d bytes: %.80s...; want the note cut to %d bytes", len(e), e, maxEventNote)
		}
	default:
		t.Fatal("no event")
	}
}

// TestGPUAttributes: the planner's hypothetical devices carry the driver
// version, PCI bus ID, PCIe root, NUMA node and minor number the agent reported in the
// NodeMigLayout status (the controller does not cache miglayout's own
// ResourceSlices), so selectors reading them judge as on the real devices.
func TestGPUAttributes(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
		{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
		{Index: 1, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady,
			Attributes: &v1alpha1.GPUAttributes{DriverVersion: "580.95.05", CUDADriverVersion: "13.0", PCIBusID: "0000:07:00.0", PCIeRoot: "pci0000:00", NUMANode: ptr.To(int32(1)), Minor: ptr.To(int32(5))}},
	}}}
	gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)
	type info struct {
		Driver, CUDA, PCI, Root string
		NUMA                    *int
		Minor                   int
	}
	var got []info
	for _, g := range gpus {
		got = append(got, info{g.Info.DriverVersion, g.Info.CUDADriverVersion, g.Info.PCIBusID, g.Info.PCIeRoot, g.Info.NUMANode, g.Info.Minor})
	}
	want := []info{{"", "", "", "", nil, 0}, {"580.95.05", "13.0", "0000:07:00.0", "pci0000:00", ptr.To(1), 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPU infos (-want +got):\n%s", diff)
	}
}

// TestApplyCancel: a cancel is written only while the NodeMigLayout still shows the
// blocked change it cancels (the agent may have applied the change, or reported it
// otherwise, since the snapshot was read); a planned change is written while the
// node is as the plan read it: the same Auto MigLayout controls it and its spec
// is unchanged (a Static MigLayout that took the node over, or switched from
// Auto, is not overwritten; a GPU another plan changed since counts toward the
// node's limit on GPUs changing at once, which this plan did not see, so
// nothing of it is written there: the next pass plans again).
func TestApplyCancel(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = "uid-auto", v1alpha1.ModeAuto
	static := staticMigLayout("static", "uid-static", "a")
	blocked := func(owner *v1alpha1.MigLayout, desired, gpu1 string, phase v1alpha1.GPUPhase) *v1alpha1.NodeMigLayout {
		return ownedBy(&v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{
				{Index: 0, MIGEnabled: true, Layout: desired}, {Index: 1, MIGEnabled: true, Layout: gpu1}}},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
				{Index: 0, MIGEnabled: true, MIGPending: true, Layout: "1g.10gb@0", Phase: phase, Reason: v1alpha1.ReasonDeviceInUse},
				{Index: 1, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}, owner)
	}
	snapNML := blocked(&auto, "7g.80gb@0", "7g.80gb@0", v1alpha1.PhaseBlocked)
	cancel, ok := cancelOf(snapNML, 0)
	if !ok {
		t.Fatal("no cancel for a GPU blocked by a device in use")
	}
	change := planner.Change{Node: "n1", GPU: 1, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("3g.40gb@4")}
	switched := auto.DeepCopy()
	switched.Spec.Mode = v1alpha1.ModeStatic
	tests := map[string]struct {
		live *v1alpha1.NodeMigLayout
		ml   *v1alpha1.MigLayout // the Auto MigLayout as it is now
		want []string            // spec layouts of GPUs 0 and 1 after apply
	}{
		"still blocked: cancelled": {blocked(&auto, "7g.80gb@0", "7g.80gb@0", v1alpha1.PhaseBlocked), &auto, []string{"1g.10gb@0", "3g.40gb@4"}},
		// The plan's changes wait for the next plan: they may serve the
		// pods of the change it meant to cancel.
		"the agent is no longer blocked: left alone":  {blocked(&auto, "7g.80gb@0", "7g.80gb@0", v1alpha1.PhaseDraining), &auto, []string{"7g.80gb@0", "7g.80gb@0"}},
		"another layout is asked for now: left alone": {blocked(&auto, "4g.40gb@0", "7g.80gb@0", v1alpha1.PhaseBlocked), &auto, []string{"4g.40gb@0", "7g.80gb@0"}},
		"GPU 1's spec changed since the plan read it": {blocked(&auto, "7g.80gb@0", "2g.20gb@0", v1alpha1.PhaseBlocked), &auto, []string{"7g.80gb@0", "2g.20gb@0"}},
		"a Static MigLayout took the node over":       {blocked(static, "7g.80gb@0", "7g.80gb@0", v1alpha1.PhaseBlocked), &auto, []string{"7g.80gb@0", "7g.80gb@0"}},
		"the MigLayout switched to Static":            {blocked(&auto, "7g.80gb@0", "7g.80gb@0", v1alpha1.PhaseBlocked), switched, []string{"7g.80gb@0", "7g.80gb@0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			layouts := applied(t, tc.live, snapNML, []planner.Change{change}, []planner.Change{cancel}, tc.ml, static)
			if diff := cmp.Diff(tc.want, layouts); diff != "" {
				t.Errorf("spec layouts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeChangeMatters: a node update wakes the planner when its taints,
// its allocatable resources or a label the pending pods select on change
// (one an Exists requirement reads coming with an empty value included),
// not for other labels nor other status.
func TestNodeChangeMatters(t *testing.T) {
	a := &AutoPlanner{labelKeys: map[string]bool{"pool": true, "gpu.example.com/mig": true}}
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "a", "nvidia.com/gfd.timestamp": "1"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}}}
	tests := map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"a label nothing selects on":                 {func(n *corev1.Node) { n.Labels["nvidia.com/gfd.timestamp"] = "2" }, false},
		"a label a pod selects on":                   {func(n *corev1.Node) { n.Labels["pool"] = "b" }, true},
		"a selected label comes with an empty value": {func(n *corev1.Node) { n.Labels["gpu.example.com/mig"] = "" }, true},
		"a taint":         {func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} }, true},
		"cordoned":        {func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		"allocatable CPU": {func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("6") }, true},
		"a device plugin registers": {func(n *corev1.Node) {
			n.Status.Allocatable["nvidia.com/mig-1g.10gb"] = resource.MustParse("7")
		}, true},
		"the same allocatable written otherwise": {func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8000m") }, false},
		"a condition's heartbeat": {func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		}, false},
		"being deleted": {func(n *corev1.Node) {
			n.DeletionTimestamp, n.Finalizers = ptr.To(metav1.Now()), []string{"example.com/hold"}
		}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.change(n)
			if got := a.nodeChangeMatters(base, n); got != tc.want {
				t.Errorf("matters = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestFailedChanges: a GPU whose change the agent could not apply is shown to the
// planner with its actual layout (the desired devices are not coming; pods are not
// promised them), still in flight; a change the agent refused as invalid for the GPU
// is cancelled like one blocked by a device in use, while one that failed on NVML or
// on drain taints is left to the agent's retries. A change cancelled, or failed on
// NVML, holds no slot of the limits on GPUs changing at once (Retrying).
func TestFailedChanges(t *testing.T) {
	tests := map[string]struct {
		phase        v1alpha1.GPUPhase
		reason       string
		wantLayout   string
		wantChanging bool
		wantRetrying bool
		wantCancel   bool
	}{
		"ready":                            {phase: v1alpha1.PhaseReady, reason: v1alpha1.ReasonLayoutApplied, wantLayout: "7g.80gb@0", wantChanging: true},
		"draining":                         {phase: v1alpha1.PhaseDraining, reason: "Draining", wantLayout: "7g.80gb@0", wantChanging: true},
		"blocked by a device":              {phase: v1alpha1.PhaseBlocked, reason: v1alpha1.ReasonDeviceInUse, wantLayout: "1g.10gb@0", wantChanging: true, wantRetrying: true, wantCancel: true},
		"blocked by an unknown allocation": {phase: v1alpha1.PhaseBlocked, reason: v1alpha1.ReasonUnknownAllocation, wantLayout: "1g.10gb@0", wantChanging: true, wantRetrying: true, wantCancel: true},
		"failed on NVML":                   {phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonNVMLError, wantLayout: "1g.10gb@0", wantChanging: true, wantRetrying: true},
		"failed on taints":                 {phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonDeviceTaintsUnsupported, wantLayout: "1g.10gb@0", wantChanging: true},
		"refused as invalid layout":        {phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonInvalidLayout, wantLayout: "1g.10gb@0", wantChanging: true, wantRetrying: true, wantCancel: true},
		"unknown GPU (never an Auto GPU)":  {phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonUnknownGPU, wantLayout: "1g.10gb@0", wantChanging: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}}},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
					Layout: "1g.10gb@0", Phase: tc.phase, Reason: tc.reason, Message: "m"}}}}
			gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)
			if len(gpus) != 1 {
				t.Fatalf("%d GPUs, want 1", len(gpus))
			}
			if got := gpus[0].Layout.String(); got != tc.wantLayout || gpus[0].Changing != tc.wantChanging || gpus[0].Retrying != tc.wantRetrying {
				t.Errorf("planner sees layout %q changing %t retrying %t, want %q changing %t retrying %t",
					got, gpus[0].Changing, gpus[0].Retrying, tc.wantLayout, tc.wantChanging, tc.wantRetrying)
			}
			if _, ok := cancelOf(nml, 0); ok != tc.wantCancel {
				t.Errorf("cancelled %t, want %t", ok, tc.wantCancel)
			}
		})
	}
}

// TestReconcileWithoutAutoNode: with an Auto MigLayout that selects no node,
// a pod waiting for a MIG device hears why, and status.auto counts it.
func TestReconcileWithoutAutoNode(t *testing.T) {
	ctx := context.Background()
	ml := migLayout("auto").selects("pool", "gpu").build()
	ml.Spec.Mode = v1alpha1.ModeAuto
	class := migDeviceClass()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "small"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: "device.attributes['mig.miglayout.io'].profile == '1g.10gb'"}}}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
		Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "mig", ResourceClaimName: ptr.To("small")}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(&ml, class, claim, pod, node("cpu-1", map[string]string{"pool": "cpu"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := events.NewFakeRecorder(10)
	a := &AutoPlanner{Client: c, Recorder: rec, Idle: time.Second, Max: 5 * time.Second, Now: func() time.Time { return now }}
	// The batching window opens, then passes.
	if res, err := a.Reconcile(ctx, autoKey); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("first pass = %+v, %v; want a wait for the batching window", res, err)
	}
	now = now.Add(2 * time.Second)
	if _, err := a.Reconcile(ctx, autoKey); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	if diff := cmp.Diff([]string{"Warning " + EventNotServable + " " + planner.NoAutoNode}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var live v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "auto"}, &live); err != nil {
		t.Fatal(err)
	}
	if a := live.Status.Auto; a == nil || a.PendingPods != 1 || a.NotServablePods != 1 {
		t.Errorf("status.auto = %+v, want 1 pending pod, not servable", a)
	}

	// A pod comes and goes within a batching window; one that comes much
	// later is batched again.
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	arrive := func(name string) *corev1.Pod {
		t.Helper()
		p := pod.DeepCopy()
		p.Name, p.UID, p.ResourceVersion = name, types.UID("uid-"+name), ""
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now = now.Add(time.Minute)
	brief := arrive("brief")
	if res, err := a.Reconcile(ctx, autoKey); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a new pod: pass = %+v, %v; want a wait for the batching window", res, err)
	}
	if err := c.Delete(ctx, brief); err != nil {
		t.Fatal(err)
	}
	// The passes the controller makes: each requeued one when asked.
	now = now.Add(500 * time.Millisecond)
	for range 5 {
		res, err := a.Reconcile(ctx, autoKey)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter == 0 || res.RequeueAfter >= time.Hour {
			break
		}
		now = now.Add(res.RequeueAfter)
	}
	now = now.Add(100 * time.Second)
	arrive("later")
	if res, err := a.Reconcile(ctx, autoKey); err != nil || res.RequeueAfter == 0 {
		t.Errorf("a pod arriving later: pass = %+v, %v; want a wait for the batching window", res, err)
	}
}

// TestSelectorLabelsWakeThePlanner: a node relabelled out of a conflict (a
// Static MigLayout no longer selects it) or into an Auto MigLayout changes
// no MigLayout nor NodeMigLayout, only the node: a change of a label any
// MigLayout selects by (matchLabels or matchExpressions) wakes the planner.
func TestSelectorLabelsWakeThePlanner(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = "uid-auto", v1alpha1.ModeAuto
	static := staticMigLayout("static", "uid-static", "x")
	static.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}}}}
	n1 := node("n1", map[string]string{"pool": "a", "team": "x", "nvidia.com/gfd.timestamp": "1"})
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&auto, static, n1).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &AutoPlanner{Client: c, Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	if _, err := a.Reconcile(context.Background(), autoKey); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"out of the Static MigLayout (matchExpressions)": {func(n *corev1.Node) { delete(n.Labels, "team") }, true},
		"out of the Auto MigLayout (matchLabels)":        {func(n *corev1.Node) { n.Labels["pool"] = "b" }, true},
		"a label nothing selects on":                     {func(n *corev1.Node) { n.Labels["nvidia.com/gfd.timestamp"] = "2" }, false},
	} {
		t.Run(name, func(t *testing.T) {
			after := n1.DeepCopy()
			tc.change(after)
			if got := a.nodeChangeMatters(n1, after); got != tc.want {
				t.Errorf("wakes the planner = %t, want %t (label keys %v)", got, tc.want, a.labelKeys)
			}
		})
	}
}

// TestLabelKeysOfUnmatchedSlices: the label keys another driver's slices
// select on are watched even when the slice matches no Auto node yet, so a
// node relabelled into its selector wakes the planner.
func TestLabelKeysOfUnmatchedSlices(t *testing.T) {
	nics := resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "rack-b-nics"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "net.example.com", Pool: resourceapi.ResourcePool{Name: "rack-b"},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}},
			Devices: []resourceapi.Device{{Name: "nic-0"}}}}
	in := AutoInputs{Driver: migslices.DefaultDriverName, Slices: []resourceapi.ResourceSlice{nics}}
	a := &AutoPlanner{labelKeys: feasibilityLabelKeys(in, planner.Snapshot{})}
	before := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "a"}}}
	after := before.DeepCopy()
	after.Labels["rack"] = "b"
	if !a.nodeChangeMatters(before, after) {
		t.Errorf("relabelling n1 into the selector of %s does not wake the planner (label keys %v)", nics.Name, a.labelKeys)
	}
}

// TestSnapshotPlansWithNVMLProfiles: a GPU whose agent reports that NVML
// describes a profile otherwise than the catalog is planned with NVML's
// values, so a selector on the memory judges planned devices as the
// devices NVML will make: a claim for at least 40500 MiB is served on an
// H100 whose driver gives 3g.40gb 40600 MiB, and not on one whose driver
// gives the catalog's 40448 (the pod would wait for ever beside a device
// made for it).
func TestSnapshotPlansWithNVMLProfiles(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.Spec.Mode, auto.UID = v1alpha1.ModeAuto, "uid-auto"
	ref := []metav1.OwnerReference{{APIVersion: "miglayout.io/v1alpha1", Kind: "MigLayout", Name: "auto", UID: "uid-auto", Controller: ptr.To(true)}}
	nml := func(name string, g *gpuBuilder) *v1alpha1.NodeMigLayout {
		n := nodeMigLayout(name).status(g).build()
		n.OwnerReferences, n.Spec.MigLayout = ref, "auto"
		return n
	}
	driver3g := v1alpha1.NVMLProfile{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEGEngines: 3}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}, Spec: resourceapi.ResourceClaimSpec{
		Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['mig.miglayout.io'].memory >= 40500 && device.attributes['mig.miglayout.io'].memory < 50000"}}},
		}}}}}}
	in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{auto},
		Nodes: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "catalog", Labels: map[string]string{"pool": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "driver", Labels: map[string]string{"pool": "a"}}},
		},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"catalog": nml("catalog", h100(0)),
			"driver":  nml("driver", h100(0).nvml(driver3g)),
		},
		Pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"},
			Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("big")}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}},
		Claims: map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: "big"}: claim},
		Classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "mig.miglayout.io"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig'"}}}}}},
	}
	res, got := planChanges(t, in)
	if diff := cmp.Diff([]string{"driver/0 -> 3g.40gb@4"}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
	}
}

// TestAutoGPUsKeepsGPUWithOddNVMLProfiles: values the controller's catalog
// cannot take (a profile it lacks, from an agent with a newer catalog) do
// not drop the GPU from the plan; the values it can take apply.
func TestAutoGPUsKeepsGPUWithOddNVMLProfiles(t *testing.T) {
	g := h100(0).layout("3g.40gb@0").nvml(
		v1alpha1.NVMLProfile{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEGEngines: 3},
		v1alpha1.NVMLProfile{Profile: "9g.99gb", MemoryMiB: 1})
	nml := nodeMigLayout("n1").spec(v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}).status(g).build()
	gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)
	if len(gpus) != 1 {
		t.Fatalf("%d GPUs planned, want 1", len(gpus))
	}
	if p, _ := gpus[0].Info.Model.Profile("3g.40gb"); p.MemoryMiB != 40600 {
		t.Errorf("3g.40gb planned with %d MiB, want 40600", p.MemoryMiB)
	}
	tooBig := nodeMigLayout("n2").status(h100(0).nvml(v1alpha1.NVMLProfile{Profile: "3g.40gb", MemoryMiB: 1 << 30})).build()
	if gpus := autoGPUs(tooBig, mig.DefaultCatalog(), modelVariants{}, nil, nil, false); len(gpus) != 1 || gpus[0].Info.Model.Variant != "" {
		t.Errorf("values the model cannot hold: %d GPUs, want 1 with the catalog's values", len(gpus))
	}
}

// planChanges plans the snapshot of in, as the controller does, and returns
// the result with its changes as "node/gpu -> layout".
func planChanges(t *testing.T, in AutoInputs) (planner.Result, []string) {
	t.Helper()
	res, err := planner.Plan(t.Context(), BuildSnapshot(in, mig.DefaultCatalog()))
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, c := range res.Changes {
		changes = append(changes, fmt.Sprintf("%s/%d -> %s", c.Node, c.GPU, c.To))
	}
	return res, changes
}

// nicPool is a pool of count slices.
func nicPool(name string, count int64) resourceapi.ResourcePool {
	return resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: count}
}

// podOwner is the owner reference the ResourceClaim controller gives a
// claim it makes from a template for the pod name (uid).
func podOwner(name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}
