package controller

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
)

// TestAgentLeasesInformerEvents: the handler Start registers on the Lease
// informer times an agent's Lease from its add and update events, and
// records a deletion only of a Lease in Namespace: a Lease of the same name
// deleted in another namespace gives an agent that stopped renewing no
// fresh lease duration.
func TestAgentLeasesInformerEvents(t *testing.T) {
	start := leaseTestStart
	now := start
	l, inf := leasesOnInformer(t, &now)
	lease := agentLease("n1", start, 40)
	inf.Add(lease)
	now = start.Add(10 * time.Second)
	renewed := agentLease("n1", start.Add(10*time.Second), 40)
	inf.Update(lease, renewed)
	if h := l.Health("n1", renewed, true, false); h.Lost || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("renewed 10 s in: %+v, want alive until %s", h, now.Add(40*time.Second))
	}

	now = start.Add(30 * time.Second)
	elsewhere := renewed.DeepCopy()
	elsewhere.Namespace = "kube-node-lease"
	inf.Delete(elsewhere)
	now = start.Add(55 * time.Second)
	if h := l.Health("n1", renewed, true, false); !h.Lost {
		t.Errorf("not renewed for 45 s, a Lease of the same name deleted in another namespace meanwhile: %+v, want lost", h)
	}

	// The agent's own Lease deleted: one default lease duration of grace
	// from the deletion, then lost.
	inf.Delete(renewed)
	if h := l.Health("n1", nil, true, false); h.Lost || !h.Recheck.Equal(now.Add(defaultAgentLeaseDuration)) {
		t.Errorf("Lease just deleted: %+v, want not lost until %s", h, now.Add(defaultAgentLeaseDuration))
	}
}

// TestAgentLeasesStartedBeforeAnyLease: the start that makes Leases first
// seen untrusted is Start's, not the first Lease's: a Lease made a minute
// after Start, in a cluster that had none, was made while this process
// watched, and its agent is trusted (not Unconfirmed).
func TestAgentLeasesStartedBeforeAnyLease(t *testing.T) {
	now := leaseTestStart
	l, inf := leasesOnInformer(t, &now)
	now = now.Add(time.Minute)
	lease := agentLease("n1", now, 40)
	inf.Add(lease)
	if h := l.Health("n1", lease, true, false); h.Lost || h.Unconfirmed || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("a Lease made a minute after Start: %+v, want trusted, alive until %s", h, now.Add(40*time.Second))
	}
}

// leasesOnInformer is leasesOnClock started on a fake Lease informer, which
// it returns.
func leasesOnInformer(t *testing.T, now *time.Time) (*AgentLeases, *controllertest.FakeInformer) {
	t.Helper()
	l := leasesOnClock(now)
	informers := &informertest.FakeInformers{Scheme: testScheme(t)}
	if err := l.Start(t.Context(), informers); err != nil {
		t.Fatal(err)
	}
	inf, err := informers.FakeInformerFor(t.Context(), &coordinationv1.Lease{})
	if err != nil {
		t.Fatal(err)
	}
	return l, inf
}
