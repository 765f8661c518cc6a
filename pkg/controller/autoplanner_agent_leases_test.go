package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// TestRestartedAutoPlannerWaitsForRenewals: n1's change serves p1 when
// the controller restarts and n2 joins with a free GPU. The new planner
// plans nothing until it sees each agent renew its Lease (n1's clock runs
// a minute behind: that does not matter); then p1 stays on n1, and n2 is
// not repartitioned. Where n1's agent never renews, it is lost once its
// Lease's grace ends, and p1 is planned on n2.
func TestRestartedAutoPlannerWaitsForRenewals(t *testing.T) {
	for name, tc := range map[string]struct {
		renews bool
		// unplanned: p1 comes after the restart, not planned on n1.
		unplanned bool
	}{
		"n1's agent renews":            {renews: true},
		"n1's agent is dead":           {},
		"n1's agent is dead, p1 after": {unplanned: true},
	} {
		t.Run(name, func(t *testing.T) {
			renews := tc.renews
			ml := autoMigLayout("auto", nil)
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
				autoClaim("c1", profileSelector("3g.40gb")))
			planned := map[int32]string{}
			if !tc.unplanned {
				h.create(autoPod("p1", h0(), "c1"))
				h.settle()
				if planned = h.specOf("n1"); len(planned) == 0 {
					t.Fatal("n1 not planned for p1")
				}
			}
			// The restart: n2 joins; the new process times the Leases.
			n1, n2 := agentLease("n1", h.now.Add(-time.Minute), 40), agentLease("n2", h.now, 40)
			h.create(node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")), n1, n2)
			if tc.unplanned {
				h.create(autoPod("p1", h0(), "c1"))
			}
			old := h.a
			h.a = &AutoPlanner{Client: old.Client, Recorder: old.Recorder, Idle: old.Idle, Max: old.Max, Now: old.Now, AgentLeases: leasesOnClock(&h.now)}
			res, err := h.a.Reconcile(t.Context(), autoKey)
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second+leaseExpirySlack {
				t.Errorf("asked to look again in %v, want within a quarter of n1's Lease's duration (10s) and slack", res.RequeueAfter)
			}
			if got := h.specOf("n2"); len(got) != 0 {
				t.Errorf("n2 planned %v before any renewal was seen", got)
			}
			renew := func(l *coordinationv1.Lease) {
				t.Helper()
				if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(l), l); err != nil {
					t.Fatal(err)
				}
				l.Spec.RenewTime.Time = l.Spec.RenewTime.Add(10 * time.Second)
				if err := h.c.Update(t.Context(), l); err != nil {
					t.Fatal(err)
				}
			}
			h.now = h.now.Add(5 * time.Second)
			// Passes as asked, for a minute (n1's Lease's grace is 40 s),
			// the live agents renewing before each.
			for end := h.now.Add(time.Minute); h.now.Before(end); {
				renew(n2)
				if renews {
					renew(n1)
				}
				res, err := h.a.Reconcile(t.Context(), autoKey)
				if err != nil {
					t.Fatal(err)
				}
				if res.RequeueAfter <= 0 {
					break
				}
				h.now = h.now.Add(min(res.RequeueAfter, time.Minute))
			}
			if renews {
				if got := h.specOf("n2"); len(got) != 0 {
					t.Errorf("n2 repartitioned %v for p1, whose change on n1 is in flight", got)
				}
				if diff := cmp.Diff(planned, h.specOf("n1")); diff != "" {
					t.Errorf("n1's change (-before +after):\n%s", diff)
				}
				return
			}
			if got := h.specOf("n2"); len(got) == 0 {
				t.Error("p1 not planned on n2 once n1's agent was lost")
			}
			if diff := cmp.Diff(planned, h.specOf("n1")); diff != "" {
				t.Errorf("n1, whose agent is dead, changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestNodesJoiningDoNotHoldAutoPlans: a controller that has run a lease
// duration trusts the Leases it sees made afterwards: GPU nodes joining
// every 5 s (a scale-up), each agent making its Lease and reporting at
// once, hold nothing, and a pending pod is planned within the batching
// window.
func TestNodesJoiningDoNotHoldAutoPlans(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")))
	h.create(agentLease("n1", h.now, 40))
	h.a.AgentLeases = leasesOnClock(&h.now)
	renewed := map[string]time.Time{"n1": h.now} // by node, the last renewal
	renew := func(name string) {
		t.Helper()
		l := agentLease(name, h.now, 40)
		if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(l), l); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime.Time = h.now
		if err := h.c.Update(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		renewed[name] = h.now
	}
	pass := func() {
		t.Helper()
		for n, last := range renewed {
			if h.now.Sub(last) >= 10*time.Second {
				renew(n)
			}
		}
		if _, err := h.a.Reconcile(t.Context(), autoKey); err != nil {
			t.Fatal(err)
		}
	}
	// The controller has run past its start: n1 seen renewing for a minute.
	for range 60 {
		h.now = h.now.Add(time.Second)
		pass()
	}
	h.create(autoPod("p1", h.now, "c1"))
	start := h.now
	for joined := 2; h.now.Before(start.Add(10 * time.Second)); h.now = h.now.Add(time.Second) {
		if h.now.Sub(start)%(5*time.Second) == 0 {
			name := fmt.Sprintf("n%d", joined)
			h.create(node(name, map[string]string{"pool": "auto"}), autoNML(name, ml, a100(0).layout("7g.80gb@0")), agentLease(name, h.now, 40))
			renewed[name] = h.now
			joined++
		}
		pass()
		for n := range renewed {
			if len(h.specOf(n)) > 0 {
				return
			}
		}
	}
	t.Errorf("p1 not planned within 10 s while nodes joined every 5 s")
}
