package controller

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// scaleInputs is a cluster of nodes × 8 GPUs (A100-80GB and H100 nodes
// alternating) under one Auto MigLayout, each GPU with a layout in use in
// part, and pending pods of one claim each (mixed profiles), the running
// pods of the devices in use with their allocated claims besides: what the
// Auto planner reads at every pass.
func scaleInputs(nodes, pending int) AutoInputs {
	rng := rand.New(rand.NewPCG(1, 2))
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		panic(err)
	}
	profileID := func(name string) int {
		p, err := model.Profile(name)
		if err != nil {
			panic(err)
		}
		return p.ID // the same on the H100
	}
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUsPerNode: 8, MaxGPUs: 1000})
	in := AutoInputs{Driver: migslices.DefaultDriverName, MigLayouts: []v1alpha1.MigLayout{*ml},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}, Claims: map[types.NamespacedName]*resourceapi.ResourceClaim{},
		Classes: []*resourceapi.DeviceClass{migDeviceClass()}}
	layouts := []struct{ layout, inUse string }{
		{"7g.80gb@0", ""}, {"3g.40gb@0,3g.40gb@4", "3g.40gb@0"},
		{"4g.40gb@0,2g.20gb@4,1g.10gb@6", "2g.20gb@4"},
		{"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", "1g.10gb@0,1g.10gb@3"},
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		in.Nodes = append(in.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "auto"}}})
		var gpus []*gpuBuilder
		for g := range int32(8) {
			l := layouts[rng.IntN(len(layouts))]
			b := a100(g)
			if i%2 == 1 {
				b = h100(g)
			}
			gpus = append(gpus, b.layout(l.layout).inUse(l.inUse))
			used, _ := mig.ParseLayout(l.inUse)
			for _, d := range used {
				// The running pod of each device in use, its claim
				// allocated on the device.
				claim := autoClaim(fmt.Sprintf("run-%s-%d-%d", name, g, d.Start), profileSelector(d.Profile))
				claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "mig", Driver: in.Driver, Pool: name,
					Device: migslices.MIGDeviceName(int(g), d.Profile, profileID(d.Profile), d.Start)}}}}
				in.Claims[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}] = claim
				pod := autoPod("pod-"+claim.Name, time.Time{}, claim.Name)
				pod.Spec.NodeName, pod.Status = name, corev1.PodStatus{Phase: corev1.PodRunning}
				in.Pods = append(in.Pods, *pod)
			}
		}
		in.NodeMigLayouts[name] = autoNML(name, ml, gpus...)
	}
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.20gb"}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range pending {
		claim := autoClaim(fmt.Sprintf("want-%05d", i), profileSelector(profiles[rng.IntN(len(profiles))]))
		in.Claims[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}] = claim
		in.Pods = append(in.Pods, *autoPod("pod-"+claim.Name, created.Add(time.Duration(rng.IntN(600))*time.Second), claim.Name))
	}
	return in
}

// BenchmarkAutoPass is one pass of the Auto planner over 1000 nodes × 8
// GPUs with 5000 pending pods (and about 10000 running ones) once its
// inputs are read from the cache: the snapshot (AutoSnapshot), the plan
// (planner.Plan), and what the pass does with it (the batching key, the
// pods' targets, status.auto). It reports each part's ns/op and
// controller/plan, the share the controller adds to the planner's time.
func BenchmarkAutoPass(b *testing.B) {
	in := scaleInputs(1000, 5000)
	ctx := klog.NewContext(b.Context(), klog.Background().V(10)) // nothing at that level: no log cost
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	var snapT, planT, afterT time.Duration
	var served int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		snap := AutoSnapshot(ctx, in, mig.DefaultCatalog(), now, 10*time.Minute)
		t1 := time.Now()
		res, err := planner.Plan(ctx, snap)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		_ = inputKey(in, snap)
		_ = repartitionTargets(in, snap, res)
		_ = AutoStatuses(in, snap, &res)
		_ = BlockedChanges(in, snap)
		t3 := time.Now()
		snapT, planT, afterT = snapT+t1.Sub(t0), planT+t2.Sub(t1), afterT+t3.Sub(t2)
		served = len(res.Served)
		if len(snap.Pending) != 5000 || len(snap.Nodes) != 1000 {
			b.Fatalf("snapshot of %d pending pods on %d nodes, want 5000 on 1000", len(snap.Pending), len(snap.Nodes))
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(snapT.Nanoseconds())/n, "snapshot-ns/op")
	b.ReportMetric(float64(planT.Nanoseconds())/n, "plan-ns/op")
	b.ReportMetric(float64(afterT.Nanoseconds())/n, "after-ns/op")
	b.ReportMetric(float64(snapT+afterT)/float64(planT), "controller/plan")
	b.ReportMetric(float64(served), "served")
}
