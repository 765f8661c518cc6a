package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAgentLeasesForgetStartsAfresh: a node forgotten (its NodeMigLayout
// gone) and selected again has its Lease first seen again: it gets one
// lease duration of grace from then, not the time left of what was seen
// before.
func TestAgentLeasesForgetStartsAfresh(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	lease := agentLease("n1", start, 40)
	l.Observe(lease)
	now = start.Add(50 * time.Second)
	l.Forget("n1")
	lease = agentLease("n1", now, 40)
	if h := l.Health("n1", lease, true, false); h.Lost || h.Unconfirmed || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("selected again after Forget: %+v, want alive until %s", h, now.Add(40*time.Second))
	}
}

// TestAgentLeasesOtherNamespaceIgnored: a Lease named as an agent's but in
// another namespace than Namespace is no renewal of the agent's Lease.
func TestAgentLeasesOtherNamespaceIgnored(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	lease := agentLease("n1", start, 40)
	l.Observe(lease)
	now = start.Add(30 * time.Second)
	elsewhere := agentLease("n1", now, 40)
	elsewhere.Namespace = "kube-node-lease"
	l.Observe(elsewhere)
	now = start.Add(45 * time.Second)
	if h := l.Health("n1", lease, true, false); !h.Lost {
		t.Errorf("not renewed for 45 s, a same-named Lease renewed in another namespace: %+v, want lost", h)
	}
}

// TestAgentLeasesOtherLeaseSameRenewTime: another Lease of the node (a
// long-named node's Lease named by an older agent, beside the current one)
// renewed at the same time as the one known is no renewal: only a later
// renewTime takes over.
func TestAgentLeasesOtherLeaseSameRenewTime(t *testing.T) {
	long := strings.Repeat("a", 240)
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	current := agentLease(long, start, 40)
	l.Observe(current)
	now = start.Add(30 * time.Second)
	other := agentLease(long, start, 40)
	other.Name = v1alpha1.AgentLeasePrefix + "0123456789abcdef"
	if v1alpha1.AgentLeaseNode(other) != long {
		t.Fatal("both Leases are the node's")
	}
	l.Observe(other)
	now = start.Add(45 * time.Second)
	if h := l.Health(long, current, true, false); !h.Lost {
		t.Errorf("not renewed for 45 s, another Lease of the node with the same renewTime seen meanwhile: %+v, want lost", h)
	}
}

// TestAgentLeasesNewHolderAtEarlierRenewTime: a Lease taken by a new
// holder counts as renewed even where its renewTime is one the previous
// holder wrote before (the new agent's clock behind): it is no older copy
// of the Lease.
func TestAgentLeasesNewHolderAtEarlierRenewTime(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	l.Observe(agentLease("n1", start, 40))
	now = start.Add(10 * time.Second)
	l.Observe(agentLease("n1", start.Add(10*time.Second), 40))
	now = start.Add(30 * time.Second)
	replaced := agentLease("n1", start, 40)
	replaced.Spec.HolderIdentity = ptr.To("n1-replaced")
	if h := l.Health("n1", replaced, true, false); h.Lost || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("a new holder: %+v, want renewed now, alive until %s", h, now.Add(40*time.Second))
	}
}

// TestAgentLeasesDeletedAgain: a Lease deleted, back, and deleted again
// is judged from its last deletion: it gets one default lease duration of
// grace from then, not from the first.
func TestAgentLeasesDeletedAgain(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	lease := agentLease("n1", start, 40)
	l.Observe(lease)
	l.deleted("n1", lease.Name)
	now = start.Add(10 * time.Second)
	back := agentLease("n1", now, 40)
	l.Observe(back)
	now = start.Add(100 * time.Second)
	l.deleted("n1", back.Name)
	now = start.Add(110 * time.Second)
	if h := l.Health("n1", nil, true, false); h.Lost || !h.Recheck.Equal(start.Add(140*time.Second)) {
		t.Errorf("10 s after its second deletion: %+v, want not lost until %s", h, start.Add(140*time.Second))
	}
}

// TestAgentLeasesDurationChanged: a Lease whose leaseDurationSeconds
// changes without a renewal is judged by its new duration from its last
// renewal.
func TestAgentLeasesDurationChanged(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	l.Observe(agentLease("n1", start, 40))
	now = start.Add(10 * time.Second)
	longer := agentLease("n1", start, 60)
	l.Observe(longer)
	now = start.Add(50 * time.Second)
	if h := l.Health("n1", longer, true, false); h.Lost || !h.Recheck.Equal(start.Add(60*time.Second)) {
		t.Errorf("50 s after its last renewal, its duration now 60 s: %+v, want alive until %s", h, start.Add(60*time.Second))
	}
}

// TestAgentLeasesNewHolderRenewsAtEarlierTime: the renewTimes a previous
// holder wrote do not make the new holder's renewals look like older
// copies: a new agent whose clock steps back to one of them renews all the
// same.
func TestAgentLeasesNewHolderRenewsAtEarlierTime(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	l.Observe(agentLease("n1", start, 40))
	now = start.Add(10 * time.Second)
	l.Observe(agentLease("n1", start.Add(10*time.Second), 40))
	now = start.Add(20 * time.Second)
	replaced := agentLease("n1", start.Add(20*time.Second), 40)
	replaced.Spec.HolderIdentity = ptr.To("n1-replaced")
	l.Observe(replaced)
	now = start.Add(30 * time.Second)
	stepped := agentLease("n1", start.Add(10*time.Second), 40)
	stepped.Spec.HolderIdentity = ptr.To("n1-replaced")
	if h := l.Health("n1", stepped, true, false); h.Lost || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("the new holder renews with a renewTime the old one wrote: %+v, want renewed now, alive until %s", h, now.Add(40*time.Second))
	}
}

// TestAgentLeasesStaleCopyOfManyRenewals: after many renewals, a copy of
// the Lease carrying any of its last staleCopies renewTimes before the
// latest is no renewal.
func TestAgentLeasesStaleCopyOfManyRenewals(t *testing.T) {
	for behind := 1; behind <= staleCopies; behind++ {
		t0 := leaseTestStart
		now := t0
		l := leasesOnClock(&now)
		var renewals []*coordinationv1.Lease
		for i := range 11 {
			now = t0.Add(time.Duration(i) * 10 * time.Second)
			lease := agentLease("n1", now, 40)
			l.Observe(lease)
			renewals = append(renewals, lease)
		}
		last := now
		now = last.Add(5 * time.Second)
		copied := renewals[len(renewals)-1-behind]
		if h := l.Health("n1", copied, true, false); h.Lost || !h.Recheck.Equal(last.Add(40*time.Second)) {
			t.Errorf("a copy %d renewals old: %+v, want no renewal, alive until %s", behind, h, last.Add(40*time.Second))
		}
	}
}

// TestAgentLeasesLostWithoutLeaseRecheck: an agent reported lost that
// holds no Lease is looked for again every quarter of the default lease
// duration.
func TestAgentLeasesLostWithoutLeaseRecheck(t *testing.T) {
	now := leaseTestStart
	l := leasesOnClock(&now)
	if h := l.Health("n1", nil, true, true); !h.Lost || !h.Recheck.Equal(now.Add(10*time.Second)) {
		t.Errorf("reported lost, no Lease: %+v, want lost, looked at again at %s", h, now.Add(10*time.Second))
	}
}

// TestAgentLeasesLostAgainAfterReturn: an agent reported lost that this
// process saw renew, and that then stops again, is lost since the renewal
// it saw: the message gives that time.
func TestAgentLeasesLostAgainAfterReturn(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	old := agentLease("n1", start.Add(-time.Hour), 40)
	l.Observe(old)
	now = start.Add(5 * time.Second)
	back := agentLease("n1", start, 40)
	if h := l.Health("n1", back, true, true); h.Lost {
		t.Fatalf("renewed: %+v, want alive", h)
	}
	now = start.Add(time.Minute)
	h := l.Health("n1", back, true, true)
	want := "has not renewed its heartbeat Lease miglayout-system/miglayout-agent-n1 since 2026-11-30T10:00:05Z (lease duration 40s)"
	if !h.Lost || !strings.Contains(h.Message, want) {
		t.Errorf("stopped again: %+v, want lost with a message containing %q", h, want)
	}
}

// TestAgentLeasesListNamespace: List reads the agents' Leases of Namespace
// only: a same-named Lease renewed later in another namespace is not the
// node's.
func TestAgentLeasesListNamespace(t *testing.T) {
	now := leaseTestStart
	l := leasesOnClock(&now)
	ours := agentLease("n1", now.Add(-time.Minute), 40)
	elsewhere := agentLease("n1", now, 40)
	elsewhere.Namespace = "kube-node-lease"
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ours, elsewhere).Build()
	got, err := l.List(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]string{}
	for node, lease := range got {
		namespaces[node] = lease.Namespace
	}
	if diff := cmp.Diff(map[string]string{"n1": leaseNS}, namespaces); diff != "" {
		t.Errorf("List, namespace by node (-want +got):\n%s", diff)
	}
}

// TestAgentLeasesNodeHealthWasLost: NodeHealth keeps an agent reported
// lost before lost until a renewal is seen, like Health, and does not
// judge the agent of a node that never reported its GPUs (not started
// yet), whatever its Lease.
func TestAgentLeasesNodeHealthWasLost(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	starting := agentLease("starting", start, 40)
	l.Observe(starting)
	now = start.Add(time.Minute)
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"dead":     nodeMigLayout("dead").status(a100(0)).build(),
		"alive":    nodeMigLayout("alive").status(a100(0)).build(),
		"starting": nodeMigLayout("starting").build(),
	}
	leases := map[string]*coordinationv1.Lease{
		"dead":     agentLease("dead", now.Add(-time.Hour), 40),
		"alive":    agentLease("alive", now.Add(-time.Hour), 40),
		"starting": starting,
	}
	health, _ := l.NodeHealth(nmls, leases, sets.New("dead"))
	got := map[string]bool{}
	for n, h := range health {
		got[n] = h.Lost
	}
	if diff := cmp.Diff(map[string]bool{"dead": true, "alive": false, "starting": false}, got); diff != "" {
		t.Errorf("lost by node (-want +got):\n%s", diff)
	}
}

// TestAgentLeasesRequeueAt: no recheck asks for no requeue; one already
// past asks for the slack only.
func TestAgentLeasesRequeueAt(t *testing.T) {
	now := leaseTestStart
	l := leasesOnClock(&now)
	for name, tc := range map[string]struct {
		at   time.Time
		want time.Duration
	}{
		"none":    {want: 0},
		"past":    {at: now.Add(-10 * time.Second), want: leaseExpirySlack},
		"now":     {at: now, want: leaseExpirySlack},
		"in 20 s": {at: now.Add(20 * time.Second), want: 20*time.Second + leaseExpirySlack},
	} {
		if got := l.requeueAt(tc.at); got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", name, got, tc.want)
		}
	}
}

// TestAgentLeasesZeroDuration: a Lease whose leaseDurationSeconds is 0 is
// judged by the default lease duration.
func TestAgentLeasesZeroDuration(t *testing.T) {
	now := leaseTestStart
	lease := agentLease("n1", now, 0)
	l := renewingLeases(&now, lease)
	if h := l.Health("n1", lease, true, false); h.Lost || !h.Recheck.Equal(now.Add(defaultAgentLeaseDuration)) {
		t.Errorf("a Lease without a duration: %+v, want alive until %s", h, now.Add(defaultAgentLeaseDuration))
	}
}

// TestAgentLeaseChangeEdges: updates of Leases other than agents' pass no
// event, whatever changes; a Lease that gets its first renewTime passes,
// one updated with no renewTime before or after does not; a negative
// duration is judged as the default one.
func TestAgentLeaseChangeEdges(t *testing.T) {
	at := leaseTestStart
	p := agentLeaseChange(leaseNS)
	leader := func(holder string) *coordinationv1.Lease {
		l := agentLease("n1", at, 40)
		l.Name = "miglayout-controller.miglayout.io"
		l.Spec.HolderIdentity = ptr.To(holder)
		return l
	}
	elsewhere := func(holder string) *coordinationv1.Lease {
		l := agentLease("n1", at, 40)
		l.Namespace = "kube-node-lease"
		l.Spec.HolderIdentity = ptr.To(holder)
		return l
	}
	unrenewed := func() *coordinationv1.Lease {
		l := agentLease("n1", at, 40)
		l.Spec.RenewTime = nil
		return l
	}
	negative := func(renew time.Time) *coordinationv1.Lease {
		l := agentLease("n1", renew, 40)
		l.Spec.LeaseDurationSeconds = ptr.To[int32](-1)
		return l
	}
	got := map[string]bool{
		"another Lease of the namespace, new holder": p.Update(event.UpdateEvent{ObjectOld: leader("a"), ObjectNew: leader("b")}),
		"an agent's Lease in another namespace":      p.Update(event.UpdateEvent{ObjectOld: elsewhere("n1"), ObjectNew: elsewhere("n2")}),
		"first renewTime":                            p.Update(event.UpdateEvent{ObjectOld: unrenewed(), ObjectNew: agentLease("n1", at, 40)}),
		"no renewTime either side":                   p.Update(event.UpdateEvent{ObjectOld: unrenewed(), ObjectNew: unrenewed()}),
		"negative duration, renewed within default":  p.Update(event.UpdateEvent{ObjectOld: negative(at), ObjectNew: negative(at.Add(30 * time.Second))}),
		"renewed exactly a lease duration later":     p.Update(event.UpdateEvent{ObjectOld: agentLease("n1", at, 40), ObjectNew: agentLease("n1", at.Add(40*time.Second), 40)}),
		"its duration lengthened with the renewal":   p.Update(event.UpdateEvent{ObjectOld: agentLease("n1", at, 40), ObjectNew: agentLease("n1", at.Add(50*time.Second), 60)}),
	}
	want := map[string]bool{
		"another Lease of the namespace, new holder": false,
		"an agent's Lease in another namespace":      false,
		"first renewTime":                            true,
		"no renewTime either side":                   false,
		"negative duration, renewed within default":  false,
		"renewed exactly a lease duration later":     false,
		"its duration lengthened with the renewal":   true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("passes (-want +got):\n%s", diff)
	}
}
