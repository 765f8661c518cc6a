package controller

import (
	"fmt"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A pod of two 4g.40gb (no A100 holds two) on a policy that lets two GPUs
// of a node change at once: the plan repartitions both GPUs of n1 (n0's
// are in use), each change naming the pod. While n1's agent drains them
// (nothing destroyed yet), n0's devices are released. The pod still waits
// for exactly the devices n1's two changes bring: the next plan keeps both
// changes and changes nothing on n0 (a pod is never given a second node's
// changes by a later plan; two GPUs of one node are one plan for it).
func TestPodSpreadOverTwoChangesInFlightKeepsThem(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2, MaxGPUs: 8})
	claim := autoClaim("c1", profileSelector("4g.40gb"))
	claim.Spec.Devices.Requests[0].Exactly.Count = 2
	h := newAutoCluster(t, ml,
		node("n0", map[string]string{"pool": "auto"}),
		autoNML("n0", ml, a100(0).layout("7g.80gb@0").inUse("7g.80gb@0"), a100(1).layout("7g.80gb@0").inUse("7g.80gb@0")),
		node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0")),
		claim, autoPod("p1", h0(), "c1"))
	h.settle()
	if spec := h.specOf("n1"); spec[0] != "4g.40gb@0" || spec[1] != "4g.40gb@0" {
		t.Fatalf("first plan: n1 -> %v (n0 -> %v), want 4g.40gb@0 on n1's GPUs 0 and 1 for p1", spec, h.specOf("n0"))
	}
	for _, g := range h.nml("n1").Spec.GPUs {
		if len(g.ServedPods) != 1 || g.ServedPods[0] != "ns/p1" {
			t.Fatalf("first plan: n1/gpu-%d serves %v, want [ns/p1]", g.Index, g.ServedPods)
		}
	}
	h.events()
	// n1's agent drains both GPUs (the 7g.80gb are tainted, the settle
	// period runs, nothing is destroyed yet) ...
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		for i := range st {
			st[i].Phase, st[i].Reason, st[i].Message = v1alpha1.PhaseDraining, "Draining", fmt.Sprintf("draining gpu-%d-mig-7g80gb-0-0", st[i].Index)
		}
		return st
	})
	// ... while the claims on n0's 7g.80gb end.
	h.agent("n0", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		for i := range st {
			st[i].InUse = ""
		}
		return st
	})
	h.now = h.now.Add(h.a.max())
	h.settle()
	n1 := h.nml("n1")
	if got := h.specOf("n1"); got[0] != "4g.40gb@0" || got[1] != "4g.40gb@0" {
		t.Errorf("n1's changes in flight for p1 rewritten to %v (reasons %q; %q) although p1 still waits for exactly their devices",
			got, n1.Spec.GPUs[0].Reason, n1.Spec.GPUs[1].Reason)
	}
	if got := h.specOf("n0"); len(got) > 0 {
		t.Errorf("n0 repartitioned to %v for p1, whose devices are coming with n1's changes in flight: a second set of GPUs changed for one pod", got)
	}
}
