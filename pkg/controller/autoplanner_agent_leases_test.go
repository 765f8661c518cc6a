package controller

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNodeOfLostAgentIsNotRepartitioned: n1's agent was reported lost
// (its row Unknown) and its Lease has not been renewed since: the planner
// writes no change on n1 for the pending pod, though its GPU is free, as
// the agent would not carry it out (and may have carried out others).
func TestNodeOfLostAgentIsNotRepartitioned(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	ml.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown, Message: "the node's agent has not renewed its heartbeat Lease"}}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.create(agentLease("n1", h.now.Add(-time.Hour), 40))
	h.a.AgentLeases = leasesOnClock(&h.now)
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written while its agent is lost", got)
	}
}

// TestLiveAgentLeaseExpiryIsLookedAtAgain: a Lease's expiry has no event
// of its own: a pass with nothing else to wait for asks to be looked at
// again once n1's Lease (40 s) would have expired, so a lost agent is seen
// in time.
func TestLiveAgentLeaseExpiryIsLookedAtAgain(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")))
	h.create(agentLease("n1", h.now, 40))
	h.a.AgentLeases = leasesOnClock(&h.now)
	if got := h.settle(); got <= 0 || got > 40*time.Second+leaseExpirySlack {
		t.Errorf("asked to look again in %v, want within the Lease's duration (40s) and slack", got)
	}
}

// TestNodeOfAgentExpiredAtSightIsNotRepartitioned: a controller that
// starts and finds n1's Lease expired by its own renewTime (its agent died
// while no controller ran; no row says it was lost) writes no change on
// n1 while no renewal is seen, though its GPU is free; once the agent
// renews, n1 serves the pod.
func TestNodeOfAgentExpiredAtSightIsNotRepartitioned(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	lease := agentLease("n1", h.now.Add(-10*time.Minute), 40)
	h.create(lease)
	h.a.AgentLeases = leasesOnClock(&h.now)
	start := h.now
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written while its agent may be lost", got)
	}
	if h.now.Sub(start) >= 40*time.Second {
		t.Fatalf("planned %v after the start: n1's agent is lost by then", h.now.Sub(start))
	}
	h.now = h.now.Add(time.Second)
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.RenewTime.Time = h.now
	if err := h.c.Update(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if got := h.specOf("n1"); len(got) == 0 {
		t.Error("n1's spec not written once its agent renewed its Lease")
	}
}
