package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// uuid sets the GPU UUID the agent reports (its devices' parentUUID).
func (b *gpuBuilder) uuid(u string) *gpuBuilder { b.g.UUID = u; return b }

// TestPodServedByChangeInFlightIsNotPlannedAgain: p1 (one 1g.10gb) arrives
// while n1's only per-node slot is held by GPU 0's change for an earlier
// plan, so the plan repartitions n2's GPU 0 for it. While that change is in
// flight, n1's GPU 0 finishes: n1 may change a GPU again, and its GPU 1
// (3g.40gb@4 in use) is where a 1g.10gb takes less room than on n2's empty
// GPU. p1 is still pending (its device does not exist yet), but its demand
// is covered by n2's change in flight: no second GPU may be repartitioned
// for it. A plan that repartitions n1's GPU 1 too drains and changes two
// GPUs for one pod, leaves one of the two devices unused, and tells p1 it
// now waits for another GPU.
func TestPodServedByChangeInFlightIsNotPlannedAgain(t *testing.T) {
	ml := autoMigLayout("auto", nil) // maxGPUsPerNode 1
	n1 := autoNML("n1", ml,
		a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, "Draining", "draining gpu-0-mig-7g80gb-0-0"),
		a100(1).layout("3g.40gb@4").inUse("3g.40gb@4"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", "planned earlier")}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), n1,
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0)),
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
	first := planOnN2ThenFinishN1(t, h)

	if got, ok := h.specOf("n1")[1]; ok {
		t.Errorf("n1/gpu-1 repartitioned to %q for p1, whose device is coming with n2/gpu-0's change in flight (%s): two GPUs changed for one pod", got, first)
	}
	if got := h.specOf("n2")[0]; got != first {
		t.Errorf("n2/gpu-0's change in flight rewritten to %q, want %q", got, first)
	}
	for _, e := range h.events() {
		if strings.Contains(e, EventWaitingForRepartition) && strings.Contains(e, "n1/gpu-1") {
			t.Errorf("p1 told it waits for another GPU: %q", e)
		}
	}
}

// TestMultiDevicePodServedByChangeInFlightIsNotPlannedAgain: p1 asks for two
// 1g.10gb on one GPU (matchAttribute parentUUID). n1 cannot change a GPU
// (its GPU 0 is changing), so the plan repartitions n2's GPU 0 for it. Once
// n1's GPU 0 is done, p1, still pending, must be counted on n2's change in
// flight: a plan that tries nodes in name order and takes the first that
// can be changed repartitions n1's GPU 1 as well, for the same pod.
func TestMultiDevicePodServedByChangeInFlightIsNotPlannedAgain(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := autoNML("n1", ml,
		a100(0).uuid("GPU-n1-0").layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, "Draining", "draining gpu-0-mig-7g80gb-0-0"),
		a100(1).uuid("GPU-n1-1"))
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", "planned earlier")}
	claim := autoClaim("c1", profileSelector("1g.10gb"))
	claim.Spec.Devices.Requests[0].Exactly.Count = 2
	sameGPU := resourceapi.FullyQualifiedName("mig.miglayout.io/parentUUID")
	claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"mig"}, MatchAttribute: &sameGPU}}
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), n1,
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).uuid("GPU-n2-0")),
		claim, autoPod("p1", h0(), "c1"))
	first := planOnN2ThenFinishN1(t, h)

	if got, ok := h.specOf("n1")[1]; ok {
		t.Errorf("n1/gpu-1 repartitioned to %q for p1, whose two devices are coming with n2/gpu-0's change in flight (%s): two GPUs changed for one pod (events %q)",
			got, first, h.events())
	}
}

// TestChangeOfDeletedPodIsNotCarriedOut: the plan repartitions n1's GPU 0
// (7g.80gb@0, free) to 3g.40gb@4 for p1. p1 is deleted while the agent is
// still draining (nothing destroyed yet), and q, which asks for a
// 7g.80gb, arrives. No pod needs the change any more, and it destroys the
// very device q can use: the plan must not keep it (its desired layout goes
// back to 7g.80gb@0, as for a change the agent cannot apply), rather than
// carry it out for nobody, tell q that devices in use are in its way, and
// repartition the GPU back to 7g.80gb@0 for q afterwards.
func TestChangeOfDeletedPodIsNotCarriedOut(t *testing.T) {
	h, p1 := planThreeGForP1(t)
	h.events()
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason, st[0].Message = v1alpha1.PhaseDraining, "Draining", "draining gpu-0-mig-7g80gb-0-0"
		return st
	})
	if err := h.c.Delete(context.Background(), p1); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.create(autoClaim("c2", profileSelector("7g.80gb")), autoPod("q", h.now, "c2"))
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Errorf("p1 is gone and nothing is destroyed yet, but n1/gpu-0 is still to become %q, destroying the free 7g.80gb@0 that q waits for (events %q, status.auto %+v)",
			got, h.events(), h.autoStatus())
	}
}

// TestChangeOfDeletedPodsIsCancelledOnlyBeforeDestroying: the plan records
// the pods a change is for (GPUSpec.ServedPods). Once none of them is
// pending any more, with no other pod pending at all, the change is
// cancelled while the agent has not started its NVML work (Draining, or not
// started: still Ready on the layout before), and carried on once it
// reports Repartitioning (NVML calls under way: a cancel would only make
// it destroy and create twice) or Pending (a failed pass, perhaps after
// NVML work).
func TestChangeOfDeletedPodsIsCancelledOnlyBeforeDestroying(t *testing.T) {
	tests := map[string]struct {
		phase      v1alpha1.GPUPhase
		wantCancel bool
	}{
		"not started": {phase: v1alpha1.PhaseReady, wantCancel: true},
		"pending (a failed pass may have done NVML work)": {phase: v1alpha1.PhasePending},
		"draining":       {phase: v1alpha1.PhaseDraining, wantCancel: true},
		"repartitioning": {phase: v1alpha1.PhaseRepartitioning},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, p1 := planThreeGForP1(t)
			if got := h.nml("n1").Spec.GPUs[0].ServedPods; !slices.Equal(got, []string{"ns/p1"}) {
				t.Errorf("spec servedPods = %q, want [ns/p1]", got)
			}
			h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
				st[0].Phase, st[0].Reason = tc.phase, string(tc.phase)
				return st
			})
			if err := h.c.Delete(context.Background(), p1); err != nil {
				t.Fatal(err)
			}
			h.now = h.now.Add(h.a.max())
			h.settle()
			want := "3g.40gb@4"
			if tc.wantCancel {
				want = "7g.80gb@0"
			}
			if got := h.specOf("n1")[0]; got != want {
				t.Errorf("after p1 is deleted (GPU %s): n1/gpu-0 -> %q, want %q", tc.phase, got, want)
			}
			if tc.wantCancel {
				if got := h.nml("n1").Spec.GPUs[0]; len(got.ServedPods) != 0 || !strings.Contains(got.Reason, "none of the pods it was for (ns/p1)") {
					t.Errorf("cancel wrote %+v; want no servedPods and a reason naming ns/p1", got)
				}
			}
		})
	}
}

// planOnN2ThenFinishN1 runs the plan that repartitions n2's GPU 0 for p1
// (n1 may change no other GPU while its GPU 0 changes), then finishes n1's
// change and plans again while n2's is still in flight. It returns n2's
// first planned layout.
func planOnN2ThenFinishN1(t *testing.T, h *autoCluster) string {
	t.Helper()
	h.settle()
	first := h.specOf("n2")[0]
	if first == "" {
		t.Fatalf("first plan: n2 not repartitioned for p1 (n1 %v, events %q)", h.specOf("n1"), h.events())
	}
	h.events()
	h.agentDone("n1")
	h.now = h.now.Add(h.a.max())
	h.settle()
	return first
}

// planThreeGForP1 plans n1's free 7g.80gb@0 into 3g.40gb@4 for pod p1 (a
// 3g.40gb claim) and returns the cluster and p1.
func planThreeGForP1(t *testing.T) (*autoCluster, *corev1.Pod) {
	t.Helper()
	ml := autoMigLayout("auto", nil)
	p1 := autoPod("p1", h0(), "c1")
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), p1)
	h.settle()
	if got := h.specOf("n1")[0]; got != "3g.40gb@4" {
		t.Fatalf("first plan: n1/gpu-0 -> %q, want 3g.40gb@4 for p1", got)
	}
	return h, p1
}

// TestFrozenNodeDoesNotTakePodFromLiveChange: n1's change for p1 was under
// way when n1 froze (here: in conflict with another MigLayout), and a later
// plan repartitioned n2 for p1, which n2's agent is carrying out. n1's
// change serves no pod while n1 is Frozen, so n2's must keep p1: were it
// given to n1, no coming device would be p1's, q (queued later, higher
// priority) would take n2's, and a third GPU would be repartitioned for p1.
func TestFrozenNodeDoesNotTakePodFromLiveChange(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	other := staticMigLayout("other", "uid-other", "x")
	other.Spec.NodeSelector.MatchLabels = map[string]string{"team": "x"}
	inFlight := func(name string) *v1alpha1.NodeMigLayout {
		n := autoNML(name, ml, a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, "Repartitioning", ""))
		n.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "1g.10gb@6", Reason: "for p1", ServedPods: []string{"ns/p1"}}}
		return n
	}
	p1 := autoPod("p1", h0(), "c1")
	q := autoPod("q", h0().Add(1), "c2")
	q.Spec.Priority = new(int32(1000))
	h := newAutoCluster(t, ml, other,
		node("n1", map[string]string{"pool": "auto", "team": "x"}), inFlight("n1"),
		node("n2", map[string]string{"pool": "auto"}), inFlight("n2"),
		node("n3", map[string]string{"pool": "auto"}), autoNML("n3", ml, a100(0).layout("")),
		autoClaim("c1", profileSelector("1g.10gb")), p1,
		autoClaim("c2", profileSelector("1g.10gb")), q)
	h.settle()
	for _, g := range h.nml("n3").Spec.GPUs {
		if slices.Contains(g.ServedPods, "ns/p1") {
			t.Errorf("n3/gpu-0 repartitioned to %q for p1 while n2's change for it is under way", g.Layout)
		}
		if !slices.Contains(g.ServedPods, "ns/q") {
			t.Errorf("n3/gpu-0 planned %q for %v, want it planned for q", g.Layout, g.ServedPods)
		}
	}
	if got := h.nml("n2").Spec.GPUs[0].ServedPods; !slices.Equal(got, []string{"ns/p1"}) {
		t.Errorf("n2/gpu-0 serves %v, want [ns/p1]", got)
	}
}

// TestDoneChangeIsNotCancelled: n1's GPU 0 was repartitioned for p1 and
// holds its desired layout (Ready); p1 is then deleted. The GPU has no
// change in flight: nothing is cancelled (the spec, its reason and
// servedPods are left as they are).
func TestDoneChangeIsNotCancelled(t *testing.T) {
	h, p1 := planThreeGForP1(t)
	h.agentDone("n1")
	if err := h.c.Delete(context.Background(), p1); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	g := h.nml("n1").Spec.GPUs[0]
	if g.Layout != "3g.40gb@4" || strings.HasPrefix(g.Reason, "cancels") || len(g.ServedPods) != 1 {
		t.Errorf("n1/gpu-0 holds its desired layout, yet a cancel was written: %+v", g)
	}
}

// TestGatedPodDoesNotKeepAChange: p1's change on n1 is draining when p1 is
// deleted and made again under the same name with a scheduling gate (a
// queueing controller gates pods at creation). A gated pod does not wait
// for devices: the change, nothing destroyed yet, is cancelled.
func TestGatedPodDoesNotKeepAChange(t *testing.T) {
	h, p1 := planThreeGForP1(t)
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason = v1alpha1.PhaseDraining, v1alpha1.ReasonDraining
		return st
	})
	ctx := context.Background()
	if err := h.c.Delete(ctx, p1); err != nil {
		t.Fatal(err)
	}
	again := autoPod("p1", h0(), "c1")
	again.UID = "uid-p1-again"
	again.Status.Conditions = nil
	again.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
	h.create(again)
	h.now = h.now.Add(h.a.max())
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Errorf("p1 made again with a scheduling gate: n1/gpu-0 -> %q, want its change cancelled back to 7g.80gb@0", got)
	}
}
