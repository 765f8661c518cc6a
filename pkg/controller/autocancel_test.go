package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestUnneededCancelKeepsAChangeAlreadyCarriedOut: the plan repartitions
// n1's GPU 0 (7g.80gb@0, free) to 3g.40gb@4 for p1. The agent destroys the
// 7g.80gb and creates the 3g.40gb, publishes it, and its pass then fails
// (the API server drops a request): it marks the GPU Pending (PassFailed,
// "the pass stopped before this GPU's change was done"), and the status
// still shows the layout before the change. Meanwhile the scheduler gives
// p1 the new 3g.40gb@4 (its claim is allocated on it) and binds it. Nothing
// about this change is "undestroyed": the 7g.80gb is gone and the new
// device is held by a claim the controller reads. Cancelling it (desired
// back to 7g.80gb@0) asks the agent to destroy p1's device.
//
// The same holds while the status still shows the GPU Ready on the layout
// before the change (the agent's report of the pass is not written yet):
// the claim on the new device tells the change was made.
func TestUnneededCancelKeepsAChangeAlreadyCarriedOut(t *testing.T) {
	for _, phase := range []v1alpha1.GPUPhase{v1alpha1.PhasePending, v1alpha1.PhaseReady} {
		t.Run(string(phase), func(t *testing.T) { testUnneededCancelKeepsAChangeAlreadyCarriedOut(t, phase) })
	}
}

func testUnneededCancelKeepsAChangeAlreadyCarriedOut(t *testing.T, phase v1alpha1.GPUPhase) {
	ml := autoMigLayout("auto", nil)
	p1 := autoPod("p1", h0(), "c1")
	c1 := autoClaim("c1", profileSelector("3g.40gb"))
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0")), c1, p1)
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Fatalf("first plan: n1/gpu-0 -> %q, want 3g.40gb@4 for p1", got)
	}
	h.events()
	// The agent's pass failed after repartitioning: Pending (PassFailed),
	// the status layout is the one before the change.
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason = v1alpha1.PhasePending, "PassFailed"
		st[0].Message = "the pass stopped before this GPU's change was done; retrying: republishing pool: the server was unable to return a response"
		if phase == v1alpha1.PhaseReady {
			st[0].Reason, st[0].Message = v1alpha1.ReasonLayoutApplied, "layout applied"
		}
		st[0].Phase = phase
		return st
	})
	// p1 got the new device and is bound.
	ctx := context.Background()
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(c1), c1); err != nil {
		t.Fatal(err)
	}
	c1.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "mig", Driver: "mig.miglayout.io", Pool: "n1", Device: migslices.MIGDeviceName(0, "3g.40gb", 9, 4)}}}}
	if err := h.c.Status().Update(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(p1), p1); err != nil {
		t.Fatal(err)
	}
	p1.Spec.NodeName = "n1"
	if err := h.c.Update(ctx, p1); err != nil {
		t.Fatal(err)
	}
	p1.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	if err := h.c.Status().Update(ctx, p1); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Errorf("n1/gpu-0's change cancelled to %q although its new 3g.40gb@4 is allocated to p1's claim (the change was carried out; the status lags): the agent is asked to destroy p1's device (reason %q)",
			got, h.nml("n1").Spec.GPUs[0].Reason)
	}
}

// TestPodNamedByTwoChangesKeepsTheOneCarriedOut: n1's GPU 0 has a change
// in flight for p1 that its agent has not started (n1 is also selected by
// MigLayout other: in conflict, left as it is). p1 is planned on n2, whose
// agent is repartitioning for it. Once the conflict ends, p1 is named by
// both changes; n2's can no longer be cancelled (NVML calls under way),
// n1's still can (nothing destroyed). serveComing takes the first node by
// name, n1, so n1's change is kept as waited for and both GPUs are
// repartitioned for one pod, one device serving nobody.
func TestPodNamedByTwoChangesKeepsTheOneCarriedOut(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	other := migLayout("other").selects("zone", "a").build()
	other.UID, other.Spec.Mode = "uid-other", v1alpha1.ModeAuto
	n1 := autoNML("n1", ml, a100(0).layout("7g.80gb@0"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", Reason: "serves 1 pending pod(s): ns/p1", ServedPods: []string{"ns/p1"}}}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto", "zone": "a"}), n1, &other,
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if got := h.specOf("n2")[0]; got != "3g.40gb@4" {
		t.Fatalf("while n1 is in conflict: n2/gpu-0 -> %q, want 3g.40gb@4 for p1 (n1 %v)", got, h.specOf("n1"))
	}
	h.agent("n2", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason, st[0].Message = v1alpha1.PhaseRepartitioning, "Repartitioning", "destroy 7g.80gb@0; create 3g.40gb@4"
		return st
	})
	if err := h.c.Delete(context.Background(), &other); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Errorf("n1/gpu-0 still to become %q for p1, whose device n2/gpu-0 is already being made (Repartitioning): two GPUs repartitioned for one pod, though n1's change has destroyed nothing and could be cancelled", got)
	}
}

// TestHeldPlanKeepsAutoStatus: n1's change for p1 is blocked by a device in
// use, so the next plan cancels it and serves p1 elsewhere; but n1's agent
// starts on the GPU before the cancel is written (the NodeMigLayout read
// for the write shows it Repartitioning), so nothing of the plan is
// written (held). The Auto status of the last plan stands: p1 still waits
// for a repartition, where a status written without a plan counted none.
func TestHeldPlanKeepsAutoStatus(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Fatalf("first plan: n1/gpu-0 -> %q, want 3g.40gb@4 for p1", got)
	}
	if st := h.autoStatus(); st == nil || st.WaitingForRepartitionPods != 1 {
		t.Fatalf("Auto status after the first plan: %+v, want p1 waiting for a repartition", st)
	}
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason, st[0].Message = v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: gpu-0-mig-7g80gb-0-0"
		return st
	})
	h.a.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if nml, ok := obj.(*v1alpha1.NodeMigLayout); ok && key.Name == "n1" && len(nml.Status.GPUs) > 0 {
				nml.Status.GPUs[0].Phase, nml.Status.GPUs[0].Reason = v1alpha1.PhaseRepartitioning, "Repartitioning"
			}
			return nil
		},
	})
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Fatalf("n1/gpu-0's change cancelled to %q although its agent started on it", got)
	}
	if got := h.specOf("n2"); len(got) != 0 {
		t.Fatalf("n2 planned %v while the plan was held", got)
	}
	if st := h.autoStatus(); st == nil || st.WaitingForRepartitionPods != 1 {
		t.Errorf("Auto status after a held plan: %+v, want the last plan's (p1 waiting for a repartition)", st)
	}
}

// TestChangeKeptWhileItsPodWaitsOutsideTheDemand: n1's GPU 0 drains for
// p1's change when kube-scheduler's next try of p1 ends on an error of its
// own (PodScheduled False, SchedulerError: a conflict writing the claim's
// allocation before binding), so p1 is no Unschedulable demand for one
// pass. p1 still exists, unbound, its claim unallocated: the change is
// kept (a cancel would have the GPU drained again once p1 is Unschedulable
// again). Once p1 is deleted, the change is cancelled.
func TestChangeKeptWhileItsPodWaitsOutsideTheDemand(t *testing.T) {
	h, _ := planThreeGForP1(t)
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason = v1alpha1.PhaseDraining, v1alpha1.ReasonDraining
		return st
	})
	ctx := context.Background()
	var p1 corev1.Pod
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "p1"}, &p1); err != nil {
		t.Fatal(err)
	}
	p1.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulerError,
		Message: `running PreBind plugin "DynamicResources": Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c1"`}}
	if err := h.c.Status().Update(ctx, &p1); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Errorf("p1 waits (SchedulerError, to be retried), yet its change was cancelled: n1/gpu-0 -> %q (reason %q)", got, h.nml("n1").Spec.GPUs[0].Reason)
	}
	if err := h.c.Delete(ctx, &p1); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Errorf("p1 deleted: n1/gpu-0 -> %q, want the change cancelled back to 7g.80gb@0", got)
	}
}

// TestChangeNotWrittenIsNotTold: one pass cancels n1's GPU 0 change (its
// pod gone, nothing destroyed) and plans GPU 1 for q. The cancel is
// written; the change's write meets a conflict (the agent wrote its
// status meanwhile) and is retried on the cache, which does not show the
// cancel yet: the spec is not the one the plan read, so the change is not
// written. q must not hear it waits for a repartition of n1/gpu-1, nor may
// status.auto count it; the next plan writes it.
func TestChangeNotWrittenIsNotTold(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2})
	n1 := autoNML("n1", ml,
		a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "draining"),
		a100(1).layout("7g.80gb@0"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", Reason: "for gone", ServedPods: []string{"ns/gone"}}}
	var behind *v1alpha1.NodeMigLayout // the cache, behind the cancel
	patches, staleReads := 0, 0
	h := newAutoClusterIntercepted(t, ml, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && n.Name == "n1" {
				patches++
				switch patches {
				case 1:
					behind = &v1alpha1.NodeMigLayout{}
					if err := cl.Get(ctx, client.ObjectKeyFromObject(n), behind); err != nil {
						return err
					}
				case 2:
					staleReads = 1 // the retry's
					return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "nodemiglayouts"}, "n1", nil)
				}
			}
			return cl.Patch(ctx, obj, p, opts...)
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && key.Name == "n1" && staleReads > 0 {
				staleReads--
				behind.DeepCopyInto(n)
				return nil
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	}, node("n1", map[string]string{"pool": "auto"}), n1, autoClaim("c1", profileSelector("1g.10gb")), autoPod("q", h0(), "c1"))
	// Passes until the one that plans (the batch waits first).
	for range 20 {
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		if patches >= 2 {
			break
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	if patches < 2 {
		t.Fatalf("%d NodeMigLayout writes, want the cancel and the change's conflicted one: the test shows nothing", patches)
	}
	if _, written := h.specOf("n1")[1]; written {
		t.Fatalf("n1/gpu-1's change written in spite of the conflict on the cache: the test shows nothing (n1 -> %v)", h.specOf("n1"))
	}
	for _, e := range h.events() {
		if strings.Contains(e, EventWaitingForRepartition) && strings.Contains(e, "n1/gpu-1") {
			t.Errorf("n1/gpu-1's change was not written, yet q heard %q", e)
		}
	}
	if st := h.autoStatus(); st != nil && st.WaitingForRepartitionPods > 0 {
		t.Errorf("status.auto counts a pod waiting for a change not written: %+v", *st)
	}
	h.settle()
	if got := h.specOf("n1"); got[0] != "7g.80gb@0" || got[1] == "" || got[1] == "7g.80gb@0" {
		t.Errorf("after the next plan: n1 -> %v, want GPU 0 cancelled back to 7g.80gb@0 and GPU 1 changed for q", got)
	}
}

// TestWaitingPodKeepsOnlyTheChangeUnderWay: p1 is named by two changes in
// flight, n1's under way (Repartitioning) and n2's not started, while its
// last scheduling try ended on a SchedulerError (no demand this pass). n1's
// change keeps p1 (oneChangePerPod), so n2's serves no pod and is
// cancelled: p1 waiting outside the demand keeps only the change that is
// its own, never a second GPU's.
func TestWaitingPodKeepsOnlyTheChangeUnderWay(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	inFlight := func(name string, phase v1alpha1.GPUPhase) *v1alpha1.NodeMigLayout {
		n := autoNML(name, ml, a100(0).layout("7g.80gb@0").phase(phase, string(phase), ""))
		n.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", Reason: "for p1", ServedPods: []string{"ns/p1"}}}
		return n
	}
	p1 := autoPod("p1", h0(), "c1")
	p1.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulerError}}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), node("n2", map[string]string{"pool": "auto"}),
		inFlight("n1", v1alpha1.PhaseRepartitioning), inFlight("n2", v1alpha1.PhaseReady), autoClaim("c1", profileSelector("3g.40gb")), p1)
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Errorf("n1/gpu-0 (under way for p1) -> %q, want it kept", got)
	}
	if got := h.specOf("n2")[0]; got != "7g.80gb@0" {
		t.Errorf("n2/gpu-0 (not started, p1 kept by n1's change) -> %q, want it cancelled: a second GPU changed for one pod", got)
	}
}

// TestBlockedByUseOutcomes: the agent outcomes that stop a GPU's change for
// good or until a device is released, so that Auto mode cancels the change
// (BlockedChanges), against those the agent retries by itself.
func TestBlockedByUseOutcomes(t *testing.T) {
	for name, tc := range map[string]struct {
		phase  v1alpha1.GPUPhase
		reason string
		want   bool
	}{
		"device in use":       {v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, true},
		"unknown allocation":  {v1alpha1.PhaseBlocked, v1alpha1.ReasonUnknownAllocation, true},
		"invalid layout":      {v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidLayout, true},
		"GPU no longer found": {v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, true},
		"NVML error":          {v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, false},
		"reset required":      {v1alpha1.PhaseBlocked, v1alpha1.ReasonResetRequired, false},
		"draining":            {v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, false},
	} {
		if got := blockedByUse(v1alpha1.GPUStatus{Phase: tc.phase, Reason: tc.reason}); got != tc.want {
			t.Errorf("%s: blockedByUse = %t, want %t", name, got, tc.want)
		}
	}
}
