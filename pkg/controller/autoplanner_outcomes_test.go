package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestAgingRequeueSurvivesUnchangedPass: after a plan the planner asks to
// be looked at again when the next pending pod starts to be planned by age.
// A later pass whose inputs are unchanged (a watched event that changes
// nothing the plan reads) keeps that appointment: the work queue keeps one
// entry per key, so that pass's RequeueAfter replaces the earlier one, and
// without agent Leases nothing else wakes the planner.
func TestAgingRequeueSurvivesUnchangedPass(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		// Both halves in use: the pod waits, a placement kept for it.
		autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
		autoClaim("c1", profileSelector("3g.40gb")))
	p := autoPod("p1", h0(), "c1")
	p.CreationTimestamp.Time = h.now.Add(-30 * time.Minute) // ages in 30 minutes
	h.create(p)
	first := h.settle()
	if first <= 0 || first > 30*time.Minute {
		t.Fatalf("after the plan: RequeueAfter %v, want at most 30m (when p1 ages)", first)
	}
	h.now = h.now.Add(time.Minute)
	res, err := h.a.Reconcile(context.Background(), autoKey)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 29*time.Minute {
		t.Errorf("a pass with unchanged inputs asks to be looked at again in %v; want at most 29m, when p1 starts to be planned by age", res.RequeueAfter)
	}
}

// TestSpareCheckCountsOnlyAutoGPUs: Auto mode plans only on GPUs with MIG
// mode on (autoGPUs skips the others and never turns MIG on), so a GPU with
// MIG off holds no spare: spares of three 3g.40gb on a node with one A100
// in MIG mode and one with MIG off are not holdable.
func TestSpareCheckCountsOnlyAutoGPUs(t *testing.T) {
	spec := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, Policy: &v1alpha1.AutoPolicy{Spares: map[string]int32{"3g.40gb": 3}}}
	inv := map[string][]v1alpha1.GPUStatus{"n1": inventory(a100(0), a100(1).migOff())}
	got := CheckSpec(mig.DefaultCatalog(), &spec, inv)
	found := false
	for _, p := range got {
		found = found || p.Reason == v1alpha1.ReasonSparesNotHoldable
	}
	if !found {
		t.Errorf("spares of 3× 3g.40gb on a node with one MIG-mode A100 (holds 2) and one with MIG off: problems %+v, want %s", got, v1alpha1.ReasonSparesNotHoldable)
	}
	// What the planner really has to work with on that node.
	nml := nodeMigLayout("n1").status(a100(0), a100(1).migOff()).build()
	if gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false); len(gpus) != 1 {
		t.Fatalf("the planner sees %d GPUs, want 1", len(gpus))
	}
}

// TestExistingDeviceNotWaitingForRepartition: a GPU is changing from
// 1g.10gb@0 to 1g.10gb@0,3g.40gb@4 (1g.10gb@0 is kept, published and free).
// A pod the plan gives 1g.10gb@0 has a device now: it hears no
// WaitingForRepartition and is not counted in
// status.auto.waitingForRepartitionPods. Nor on a GPU whose change failed
// and is retried (its Layout is the actual one: every device there exists).
func TestExistingDeviceNotWaitingForRepartition(t *testing.T) {
	for name, g := range map[string]*gpuBuilder{
		"change in flight, the device kept":           a100(0).layout("1g.10gb@0").phase(v1alpha1.PhaseRepartitioning, "Repartitioning", ""),
		"change failed on NVML, retried by the agent": a100(0).layout("1g.10gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "boom"),
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			nml := autoNML("n1", ml, g)
			nml.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0,3g.40gb@4", "")}
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), nml,
				autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
			h.settle()
			for _, e := range h.events() {
				if strings.Contains(e, EventWaitingForRepartition) {
					t.Errorf("pod given the existing free device 1g.10gb@0 heard %q", e)
				}
			}
			if s := h.autoStatus(); s == nil || s.WaitingForRepartitionPods != 0 {
				t.Errorf("status.auto = %+v, want waitingForRepartitionPods 0 (the device exists)", s)
			}
		})
	}
}

// TestWaitingPodHearsAgain: a pod's event is recorded once per outcome, and
// again once it may have expired from the API server (--event-ttl, one hour
// by default), so that a pod waiting hours for capacity (a 7g.80gb claim
// can) still shows why in kubectl describe.
func TestWaitingPodHearsAgain(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.a.AgingAfter = -1 // no aging: the outcome stays exactly the same
	h.settle()
	if got := h.events(); len(got) != 1 {
		t.Fatalf("first plan: events %q, want one WaitingForCapacity", got)
	}
	// Two hours later another pod arrives that nothing can serve; p1
	// still waits exactly as before.
	h.now = h.now.Add(2 * time.Hour)
	h.create(autoClaim("c2", "device.attributes['mig.miglayout.io'].memory >= 200000"), autoPod("p2", h.now, "c2"))
	h.settle()
	heard, second := false, h.events()
	if len(second) == 0 {
		t.Fatal("no plan ran two hours later")
	}
	for _, e := range second {
		heard = heard || strings.Contains(e, EventWaitingForCapacity)
	}
	if !heard {
		t.Errorf("p1, still waiting two hours later (its event expired from the API server after one), hears nothing again; events of that plan: %q", second)
	}
}

// TestWaitingPodHearsAgainUnasked: with nothing changing at all, the
// planner wakes up by itself while a pod waits, and the pod's event is
// never older than the API server's default --event-ttl (one hour).
func TestWaitingPodHearsAgainUnasked(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.a.AgingAfter = -1
	start := h.now
	last := h.now
	for h.now.Sub(start) < 4*time.Hour {
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h.events() {
			if strings.Contains(e, EventWaitingForCapacity) {
				last = h.now
			}
		}
		if gap := h.now.Sub(last); gap >= time.Hour {
			t.Fatalf("at %s p1's last event is %s old", h.now.Sub(start), gap)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter >= time.Hour {
			t.Fatalf("at %s the planner asks to be woken in %v while p1 waits", h.now.Sub(start), res.RequeueAfter)
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
}
