package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// scaleSnapshot is the planning benchmark's input: nodes × 8 GPUs, mixed
// A100-SXM4-80GB and H100-SXM5-80GB, a third of them partitioned and partly
// allocated, and claims of mixed profiles and selectors (by profile name, by
// memory, by product name prefix).
func scaleSnapshot(nodes, claims int, seed uint64) Snapshot {
	return scaleSnapshotOf(nodes, claims, seed, []gpuLayout{
		{"7g.80gb@0", ""}, {"", ""}, {"3g.40gb@0,3g.40gb@4", "3g.40gb@0"},
		{"4g.40gb@0,2g.20gb@4,1g.10gb@6", "2g.20gb@4"}, {"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", "1g.10gb@0,1g.10gb@3"},
	})
}

// busySnapshot is scaleSnapshot on a nearly full cluster: every GPU has
// devices in use, so most large claims find no room and each keeps a
// placement (the planner's worst case for holds).
func busySnapshot(nodes, claims int, seed uint64) Snapshot {
	return scaleSnapshotOf(nodes, claims, seed, []gpuLayout{
		{"7g.80gb@0", "7g.80gb@0"}, {"4g.40gb@0,3g.40gb@4", "4g.40gb@0"}, {"3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4"},
		{"2g.20gb@0,2g.20gb@2,3g.40gb@4", "2g.20gb@0,3g.40gb@4"},
		{"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@4,1g.10gb@5"},
	})
}

// gpuLayout is a GPU's layout and its pinned devices (layout strings).
type gpuLayout struct{ layout, pinned string }

func scaleSnapshotOf(nodes, claims int, seed uint64, layouts []gpuLayout) Snapshot {
	rng := rand.New(rand.NewPCG(seed, 1))
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}}
	for i := range nodes {
		model := "A100-SXM4-80GB"
		if i%2 == 1 {
			model = "H100-SXM5-80GB"
		}
		b := node(fmt.Sprintf("node-%04d", i)).policy(Policy{MaxGPUsPerNode: 8})
		for range 8 {
			l := layouts[rng.IntN(len(layouts))]
			b.gpu(model, l.layout, l.pinned)
		}
		snap.Nodes = append(snap.Nodes, b.build())
	}
	selectors := []string{
		profileIs("1g.10gb"), profileIs("2g.20gb"), profileIs("3g.40gb"), profileIs("4g.40gb"), profileIs("7g.80gb"), profileIs("1g.20gb"),
		"device.attributes['mig.miglayout.io'].memory >= 16000",
		"device.attributes['mig.miglayout.io'].memory >= 30000 && device.attributes['mig.miglayout.io'].memory <= 50000",
		"device.attributes['mig.miglayout.io'].productName.startsWith('NVIDIA H100') && device.attributes['mig.miglayout.io'].memory >= 9000",
	}
	for i := range claims {
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("pod-%05d", i), rng.IntN(600)).claim(selectors[rng.IntN(len(selectors))], 1).build())
	}
	return snap
}

// BenchmarkPlanFull is a full plan of 5000 pending claims on 1000 nodes × 8
// GPUs (goal: ≤ 1 s per op on one core).
func BenchmarkPlanFull(b *testing.B) { benchPlan(b, scaleSnapshot(1000, 5000, 1)) }

// BenchmarkPlanFullGroupLimit is BenchmarkPlanFull with every node in one
// MigLayout at the CRD's default limit of 8 GPUs changing at once
// (Snapshot.GroupMaxGPUs): once 8 are changed, the thousands of pods left
// can only get free devices (goal: as BenchmarkPlanFull).
func BenchmarkPlanFullGroupLimit(b *testing.B) {
	snap := scaleSnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		snap.Nodes[i].Policy.Group = "auto"
	}
	snap.GroupMaxGPUs = map[string]int{"auto": 8}
	benchPlan(b, snap)
}

// BenchmarkPlanFullOneGPUPerNode is BenchmarkPlanFull at the CRD's default
// of one GPU changed at once per node (Policy.MaxGPUsPerNode): once most
// nodes have changed one, the pods left walk past their GPUs.
func BenchmarkPlanFullOneGPUPerNode(b *testing.B) {
	snap := scaleSnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		snap.Nodes[i].Policy.MaxGPUsPerNode = 1
	}
	benchPlan(b, snap)
}

// BenchmarkPlanMultiDevice is BenchmarkPlanFull's cluster, a quarter of its
// size, with every pending pod asking for one to three devices of one
// profile (pods of several devices are planned node by node, each node's
// way checked by the allocator and the scheduler's replay): 250 nodes × 8
// GPUs, 1250 pods.
func BenchmarkPlanMultiDevice(b *testing.B) {
	snap := scaleSnapshot(250, 1250, 1)
	rng := rand.New(rand.NewPCG(7, 1))
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "1g.20gb"}
	for i := range snap.Pending {
		snap.Pending[i] = pod(fmt.Sprintf("multi-%05d", i), rng.IntN(600)).claim(profileIs(profiles[rng.IntN(len(profiles))]), int64(1+rng.IntN(3))).build()
	}
	benchPlan(b, snap)
}

// BenchmarkPlanFullWithRoom is BenchmarkPlanFull on nodes that list their
// allocatable CPU, memory and pods, each with bound pods of two priorities
// and every pending pod asking for CPU and memory: the cost of judging each
// node's room (Room) for each pod.
func BenchmarkPlanFullWithRoom(b *testing.B) {
	snap := scaleSnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		node := n.Node.DeepCopy()
		node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourceMemory: resource.MustParse("2Ti"), corev1.ResourcePods: resource.MustParse("110")}
		n.Node = node
		n.Requested = []PriorityRequests{
			{Priority: 0, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("20")}},
			{Priority: 1000, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("8")}},
		}
	}
	for i := range snap.Pending {
		p := snap.Pending[i].Pod.DeepCopy()
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi")}}}}
		snap.Pending[i].Pod = p
	}
	benchPlan(b, snap)
}

// BenchmarkPlanBusy is a full plan of 5000 pending claims on 1000 nodes × 8
// GPUs that are nearly full: most large claims keep a placement each.
func BenchmarkPlanBusy(b *testing.B) { benchPlan(b, busySnapshot(1000, 5000, 1)) }

// BenchmarkPlanPerGPU is BenchmarkPlanBusy with every GPU of its own UUID
// and 50 more claims that each name a GPU by index, which are judged on
// each GPU's own devices (the per-node path): their extra cost.
func BenchmarkPlanPerGPU(b *testing.B) {
	snap := busySnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		for j := range snap.Nodes[i].GPUs {
			snap.Nodes[i].GPUs[j].Info.UUID = fmt.Sprintf("GPU-%04d-%d", i, j)
		}
	}
	for i := range 50 {
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("pinned-%02d", i), 1).
			claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].parentIndex == "+itoa(i%8), 1).build())
	}
	benchPlan(b, snap)
}

// BenchmarkPlanLostZone is BenchmarkPlanBusy with half the nodes Frozen
// (their agents lost: a zone cut off) and 500 more claims no node can
// serve, each of which is judged against the frozen nodes
// (WaitsForLostNode): compare with BenchmarkPlanBusy.
func BenchmarkPlanLostZone(b *testing.B) {
	snap := busySnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		snap.Nodes[i].Frozen = i%2 == 0
	}
	for i := range 500 {
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("huge-%03d", i), 1).
			claim("device.attributes['mig.miglayout.io'].memory >= 200000", 1).build())
	}
	benchPlan(b, snap)
}

// BenchmarkPlanBesideHeldDevicesNotPlanned is BenchmarkPlanBusy with a GPU
// of MIG mode off on every node (published whole, a device the plan does
// not make) that a claim holds, and 200 more claims of a class that admits
// MIG devices and whole GPUs alike, judged against those devices first
// (serveOnOthers, which runs no allocator on a node whose admitted devices
// are all held): compare with BenchmarkPlanBusy.
func BenchmarkPlanBesideHeldDevicesNotPlanned(b *testing.B) {
	snap := busySnapshot(1000, 5000, 1)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		s := unplannedWholeGPU()
		s.Name, s.Spec.NodeName, s.Spec.Pool.Name = n.Node.Name+"/unplanned", ptr.To(n.Node.Name), n.Node.Name+"/unplanned"
		n.OtherSlices = []*resourceapi.ResourceSlice{s}
		snap.OtherHeld.Devices = append(snap.OtherHeld.Devices, structured.MakeDeviceID(driver, s.Spec.Pool.Name, "gpu-1"))
	}
	snap.Classes = append(snap.Classes, anyDeviceOfTheDriverClass())
	for i := range 200 {
		p := anyClassPod(fmt.Sprintf("any-%03d", i))
		p.Claims[0].Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.attributes['mig.miglayout.io'].type == 'gpu' || " + profileIs("3g.40gb")}}}
		snap.Pending = append(snap.Pending, p)
	}
	benchPlan(b, snap)
}

// benchPlan measures full plans of snap.
// BenchmarkPlanManyWaiters: 200 All-mode pods wait on each of 20 nodes
// (each serves a 4g.40gb pod), and 60 younger pods of one small device
// each are planned, every candidate node's scheduler replay taking the
// waiting pods in their turn (nodeAgrees; those that ask alike are
// allocated once per replay).
func BenchmarkPlanManyWaiters(b *testing.B) {
	var snap Snapshot
	snap.Driver, snap.Classes, snap.Now = driver, []*resourceapi.DeviceClass{migClass()}, t0
	for i := range 20 {
		snap.Nodes = append(snap.Nodes, node(fmt.Sprintf("n%02d", i)).gpu("A100-SXM4-80GB", "", "").build())
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("big%02d", i), 100).priority(10).claim(profileIs("4g.40gb"), 1).build())
	}
	for i := range 200 {
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("all%03d", i), 50).priority(5).claim(profileIs("1g.10gb"), 0).allDevices().build())
	}
	for i := range 60 {
		snap.Pending = append(snap.Pending, pod(fmt.Sprintf("s%03d", i), 1).priority(1).claim(profileIs("1g.10gb")+" || "+profileIs("2g.20gb"), 1).build())
	}
	benchPlan(b, snap)
}

func benchPlan(b *testing.B, snap Snapshot) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanAddOne is the cost of planning one more claim on top of a
// plan of 5000 with Planner.Add (goal: ≤ 10 ms per op). The controller does
// not take this path: it plans each batch whole (BenchmarkPlanFull, and
// BenchmarkAutoPass in package controller for its whole pass).
func BenchmarkPlanAddOne(b *testing.B) {
	snap := scaleSnapshot(1000, 5000+100000, 1)
	extra := snap.Pending[5000:]
	snap.Pending = snap.Pending[:5000]
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := pl.Add(context.Background(), extra[i%len(extra)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
