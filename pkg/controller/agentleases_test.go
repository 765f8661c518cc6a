package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/api/v1alpha1"
)

const leaseNS = "miglayout-system"

// nodeUID is every test node's UID (a long-named node's Lease is named
// after it).
const nodeUID = "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c"

// leaseTestStart is when the Lease tests' clocks start.
var leaseTestStart = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// leasesOnClock is AgentLeases of leaseNS whose clock reads *now: a test
// moves the clock by setting it.
func leasesOnClock(now *time.Time) *AgentLeases {
	return &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return *now }}
}

// renewingLeases is leasesOnClock having seen each of leases renewed at
// *now (a process that has timed them for a while): their agents are
// alive, not Unconfirmed. The leases as given stay older copies.
func renewingLeases(now *time.Time, leases ...*coordinationv1.Lease) *AgentLeases {
	l := leasesOnClock(now)
	for _, lease := range leases {
		l.Observe(lease)
		renewed := lease.DeepCopy()
		renewed.Spec.RenewTime = &metav1.MicroTime{Time: lease.Spec.RenewTime.Add(time.Second)}
		l.Observe(renewed)
	}
	return l
}

// agentLease is node's heartbeat Lease as its agent last wrote it.
func agentLease(node string, renew time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: v1alpha1.AgentLeaseName(node, nodeUID)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

func TestAgentLeasesHealth(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	// The agent's clock is an hour behind: renewTime is not compared with
	// the controller's clock, only watched for change. First seen, the
	// agent is Unconfirmed until a renewal is seen.
	skewed := start.Add(-time.Hour)
	lease := agentLease("n1", skewed, 40)
	steps := []struct {
		after       time.Duration // since start
		renewal     bool          // the agent renews just before
		lost        bool
		unconfirmed bool
		expires     time.Duration // since start, for a live agent: the recheck
	}{
		{after: 0, unconfirmed: true, expires: 10 * time.Second},                // first seen: a grace, untrusted
		{after: 39 * time.Second, unconfirmed: true, expires: 40 * time.Second}, // not renewed, not expired yet
		{after: 40 * time.Second, lost: true},                                   // expired
		{after: 50 * time.Second, renewal: true, expires: 90 * time.Second},
		{after: 2 * time.Minute, lost: true},
	}
	for i, st := range steps {
		now = start.Add(st.after)
		if st.renewal {
			lease = agentLease("n1", lease.Spec.RenewTime.Add(50*time.Second), 40)
			l.Observe(lease)
		}
		h := l.Health("n1", lease, true, false)
		if h.Lost != st.lost || h.Unconfirmed != st.unconfirmed {
			t.Fatalf("step %d (%s): lost %v, unconfirmed %v, want %v, %v (%+v)", i, st.after, h.Lost, h.Unconfirmed, st.lost, st.unconfirmed, h)
		}
		if !st.lost && !h.Recheck.Equal(start.Add(st.expires)) {
			t.Errorf("step %d: recheck at %s, want the expiry %s", i, h.Recheck, start.Add(st.expires))
		}
		if st.lost && !h.Recheck.Equal(now.Add(10*time.Second)) {
			t.Errorf("step %d: recheck at %s, want a quarter lease duration on", i, h.Recheck)
		}
		if st.lost && !strings.Contains(h.Message, "has not renewed its heartbeat Lease miglayout-system/miglayout-agent-n1 since") {
			t.Errorf("step %d: message %q", i, h.Message)
		}
	}
	// A holder change counts as a renewal.
	moved := agentLease("n1", lease.Spec.RenewTime.Time, 40)
	moved.Spec.HolderIdentity = ptr.To("n1-replaced")
	if h := l.Health("n1", moved, true, false); h.Lost {
		t.Errorf("a new holder: %+v", h)
	}
}

// TestAgentLeasesNoLease: a node whose agent reported but holds no Lease
// this process saw is Unconfirmed for a default lease duration from the
// process's start (or from when it was first found so, if later), then
// lost (an agent that died while no controller ran,
// its Lease gone with a reinstall); a Lease seen deleted gets one default
// lease duration of grace (a Node recreated, its Lease with it); a node
// reported lost before stays lost; Forget starts a node afresh, as a Lease
// never seen.
func TestAgentLeasesNoLease(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	if h := l.Health("old-agent", nil, true, false); h.Lost || !h.Unconfirmed || !h.Recheck.Equal(start.Add(40*time.Second)) ||
		!strings.Contains(h.Message, "seen no heartbeat Lease miglayout-system/miglayout-agent-old-agent") {
		t.Errorf("no Lease seen at the start: %+v, want Unconfirmed until %s, naming the Lease", h, start.Add(40*time.Second))
	}
	if h := l.Health("was-lost", nil, true, true); !h.Lost || !strings.Contains(h.Message, "--lease-namespace=miglayout-system") {
		t.Errorf("reported lost before, no Lease: %+v, want lost, naming the flag", h)
	}
	lease := agentLease("n1", start, 40)
	l.Observe(lease)
	l.deleted("n1", lease.Name) // the informer's delete
	if h := l.Health("n1", nil, true, false); h.Lost || !h.Recheck.Equal(start.Add(40*time.Second)) {
		t.Errorf("Lease just deleted: %+v, want not lost until %s", h, start.Add(40*time.Second))
	}
	now = start.Add(40 * time.Second)
	if h := l.Health("n1", nil, true, false); !h.Lost {
		t.Errorf("Lease gone for 40s: %+v, want lost", h)
	}
	if h := l.Health("old-agent", nil, true, false); !h.Lost || h.Unconfirmed {
		t.Errorf("no Lease seen in the 40s since the start: %+v, want lost", h)
	}
	l.Observe(agentLease("n1", now, 40))
	if h := l.Health("n1", agentLease("n1", now, 40), true, false); h.Lost {
		t.Errorf("the Lease is back: %+v", h)
	}
	// A Lease the cache no longer has, before the informer's handler ran.
	l.Observe(agentLease("n2", start, 40))
	if h := l.Health("n2", nil, true, false); h.Lost || h.Recheck.IsZero() {
		t.Errorf("Lease gone from the cache: %+v, want its grace", h)
	}
	l.Forget("n2")
	if h := l.Health("n2", nil, true, false); h.Lost || !h.Unconfirmed || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("after Forget: %+v, want judged as a Lease never seen: Unconfirmed for 40s from now", h)
	}
	// n1's NodeMigLayout is gone (its MigLayout deleted): nothing is kept.
	now = start.Add(50 * time.Second)
	l.deleted("n1", "")
	l.Retain([]string{"n3"})
	if h := l.Health("n1", nil, true, false); h.Lost || !h.Unconfirmed {
		t.Errorf("after Retain without n1: %+v, want judged as a Lease never seen: Unconfirmed", h)
	}
	now = now.Add(40 * time.Second)
	if h := l.Health("n1", nil, true, false); !h.Lost || !strings.Contains(h.Message, "holds no heartbeat Lease") {
		t.Errorf("reported without a Lease for 40s: %+v, want lost", h)
	}
	// A node first found reported without a Lease long after the start (its
	// first report came before its Lease's event) gets 40 s from then, and
	// its Lease seen ends that.
	if h := l.Health("joining", nil, true, false); h.Lost || !h.Unconfirmed || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("a node joining, its Lease not seen yet: %+v, want Unconfirmed for 40s from now", h)
	}
	l.Observe(agentLease("joining", now, 40))
	if h := l.Health("joining", agentLease("joining", now, 40), true, false); h.Lost || h.Unconfirmed {
		t.Errorf("the joining node's Lease seen: %+v, want alive", h)
	}
	// Forget and Retain drop when a node was first found without a Lease:
	// one whose NodeMigLayout was deleted and made again starts afresh.
	for name, drop := range map[string]func(string){
		"Forget": l.Forget,
		"Retain": func(string) { l.Retain(nil) },
	} {
		node := "again-" + strings.ToLower(name)
		l.Health(node, nil, true, false)
		now = now.Add(50 * time.Second)
		if h := l.Health(node, nil, true, false); !h.Lost {
			t.Fatalf("%s: reported without a Lease for 50s: %+v, want lost", name, h)
		}
		drop(node)
		if h := l.Health(node, nil, true, false); h.Lost || !h.Unconfirmed || !h.Recheck.Equal(now.Add(40*time.Second)) {
			t.Errorf("after %s: %+v, want Unconfirmed for 40s from now", name, h)
		}
	}
	if h := l.Health("n3", nil, false, false); h.Lost || !h.Recheck.IsZero() {
		t.Errorf("never reported, no Lease: %+v, want not lost (not started)", h)
	}
	var off *AgentLeases
	if h := off.Health("n1", nil, true, true); h.Lost {
		t.Errorf("checks off: %+v", h)
	}
	off.Forget("n1")
	if d := off.requeueAt(time.Now()); d != 0 {
		t.Errorf("checks off: requeue after %s", d)
	}
}

func TestAgentLeasesNodeHealth(t *testing.T) {
	now := leaseTestStart
	l := leasesOnClock(&now)
	renewed := now.Add(-10 * time.Second) // by the agent's clock
	l.Observe(agentLease("early", renewed, 40))
	now = now.Add(20 * time.Second)
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"early":  nodeMigLayout("early").status(a100(0)).build(),
		"late":   nodeMigLayout("late").status(a100(0)).build(),
		"absent": nodeMigLayout("absent").status(a100(0)).build(),
		"new":    nodeMigLayout("new").build(),
	}
	leases := map[string]*coordinationv1.Lease{
		"early": agentLease("early", renewed, 40),
		"late":  agentLease("late", now, 60),
	}
	health, soonest := l.NodeHealth(nmls, leases, nil)
	got := map[string]bool{}
	for n, h := range health {
		got[n] = h.Lost
	}
	want := map[string]bool{"early": false, "late": false, "absent": false, "new": false} // absent: never held one
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: lost = %v, want %v", n, got[n], w)
		}
	}
	// early, seen 20 s ago and not renewed since, is Unconfirmed: looked
	// at again every quarter of its 40 s.
	if wantAt := now.Add(10 * time.Second); !soonest.Equal(wantAt) {
		t.Errorf("soonest recheck %s, want %s", soonest, wantAt)
	}
	if d := l.requeueAt(soonest); d != 10*time.Second+leaseExpirySlack {
		t.Errorf("requeue after %s", d)
	}
}

// TestAgentLeasesAfterRestart: a controller that starts knows no renewal;
// an agent its predecessor reported lost stays lost until this one sees a
// renewal (it came back as Ready, with an AgentReturned event, for a lease
// duration), while the others get one lease duration of grace.
func TestAgentLeasesAfterRestart(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	dead := agentLease("dead", start.Add(-time.Hour), 40)
	h := l.Health("dead", dead, true, true)
	if !h.Lost || !strings.Contains(h.Message, "was reported lost") {
		t.Errorf("reported lost before the restart: %+v, want still lost", h)
	}
	if h := l.Health("alive", agentLease("alive", start.Add(-time.Hour), 40), true, false); h.Lost {
		t.Errorf("not reported lost: %+v, want a grace period", h)
	}
	now = start.Add(5 * time.Second)
	back := agentLease("dead", start, 40)
	l.Observe(back)
	if h := l.Health("dead", back, true, true); h.Lost {
		t.Errorf("renewed after the restart: %+v, want alive", h)
	}
}

// TestLostNodeLookedAtAgain: a lost agent whose renewal arrives late (its
// gap by the agent's clock under the lease duration, so no event passes) is
// found back by the reconcile its Recheck asks for.
func TestLostNodeLookedAtAgain(t *testing.T) {
	start := leaseTestStart
	now := start
	l := leasesOnClock(&now)
	old := agentLease("n1", start, 40)
	l.Observe(old)
	now = start.Add(41 * time.Second)
	h := l.Health("n1", old, true, false)
	if !h.Lost || h.Recheck.IsZero() {
		t.Fatalf("expired: %+v, want lost with a recheck", h)
	}
	late := agentLease("n1", start.Add(38*time.Second), 40)
	if agentLeaseChange(leaseNS).Update(event.UpdateEvent{ObjectOld: old, ObjectNew: late}) {
		t.Log("the late renewal passes the predicate")
	}
	now = h.Recheck
	if h := l.Health("n1", late, true, true); h.Lost {
		t.Errorf("at the recheck, with the late renewal in the cache: %+v, want alive", h)
	}
}

// TestAgentLeaseName: a node's Lease is named after the node, or after its
// UID where the name is too long, and is known by its node either way.
func TestAgentLeaseName(t *testing.T) {
	long := strings.Repeat("a", 238)
	for node, want := range map[string]string{
		"gpu-node-1":             "miglayout-agent-gpu-node-1",
		strings.Repeat("a", 237): "miglayout-agent-" + strings.Repeat("a", 237),
		long:                     "miglayout-agent-" + nodeUID,
		strings.Repeat("b", 253): "miglayout-agent-" + nodeUID,
	} {
		got := v1alpha1.AgentLeaseName(node, nodeUID)
		if got != want {
			t.Errorf("AgentLeaseName(%d characters) = %q, want %q", len(node), got, want)
		}
		if back := v1alpha1.AgentLeaseNode(agentLease(node, time.Now(), 40)); back != node {
			t.Errorf("AgentLeaseNode of %q = %q, want the node back", got, back)
		}
	}
	for name, lease := range map[string]*coordinationv1.Lease{
		"not an agent's":                  {ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}},
		"an agent's without holder":       {ObjectMeta: metav1.ObjectMeta{Name: "miglayout-agent-n1"}},
		"a UID-named one held by a short": {ObjectMeta: metav1.ObjectMeta{Name: "miglayout-agent-" + nodeUID}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1")}},
	} {
		want := map[string]string{"not an agent's": "", "an agent's without holder": "n1", "a UID-named one held by a short": nodeUID}[name]
		if got := v1alpha1.AgentLeaseNode(lease); got != want {
			t.Errorf("%s: AgentLeaseNode = %q, want %q", name, got, want)
		}
	}
	// A long-named node's agent is judged by its UID-named Lease.
	now := leaseTestStart
	l := leasesOnClock(&now)
	lease := agentLease(long, now, 40)
	l.Observe(lease)
	if h := l.Health(long, lease, true, false); h.Lost || h.Recheck.IsZero() {
		t.Errorf("long-named node with its Lease: %+v, want alive", h)
	}
	now = now.Add(time.Minute)
	if h := l.Health(long, lease, true, false); !h.Lost || !strings.Contains(h.Message, lease.Name) {
		t.Errorf("long-named node whose Lease ran out: %+v, want lost naming %s", h, lease.Name)
	}
	l.Forget(long)
	if h := l.Health(long, nil, true, true); !h.Lost || !strings.Contains(h.Message, "miglayout-agent-<node UID>") {
		t.Errorf("long-named node without Lease: %+v", h)
	}

	// Listed by node; a node made again under a new UID has two Leases
	// until the old Node's is collected: the one renewed last counts.
	stale := agentLease(long, now.Add(-time.Hour), 40)
	stale.Name = v1alpha1.AgentLeasePrefix + "11111111-2222-4333-8444-555555555555"
	other := agentLease("n1", now, 40)
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: "kube-scheduler"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(stale, lease, other, foreign).Build()
	got, err := l.List(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for node, ls := range got {
		names[node] = ls.Name
	}
	if diff := cmp.Diff(map[string]string{long: lease.Name, "n1": other.Name}, names); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestAgentLeaseChange(t *testing.T) {
	at := leaseTestStart
	p := agentLeaseChange(leaseNS)
	other := agentLease("n1", at, 40)
	other.Namespace = "kube-node-lease"
	leader := agentLease("n1", at, 40)
	leader.Name = "miglayout-controller.miglayout.io"
	newHolder := agentLease("n1", at.Add(10*time.Second), 40)
	newHolder.Spec.HolderIdentity = ptr.To("n2")
	tests := map[string]struct {
		got, want bool
	}{
		"created":                   {p.Create(event.CreateEvent{Object: agentLease("n1", at, 40)}), true},
		"deleted":                   {p.Delete(event.DeleteEvent{Object: agentLease("n1", at, 40)}), true},
		"another namespace":         {p.Create(event.CreateEvent{Object: other}), false},
		"not an agent's Lease":      {p.Create(event.CreateEvent{Object: leader}), false},
		"renewed on time":           {p.Update(event.UpdateEvent{ObjectOld: agentLease("n1", at, 40), ObjectNew: agentLease("n1", at.Add(10*time.Second), 40)}), false},
		"renewed after a long gap":  {p.Update(event.UpdateEvent{ObjectOld: agentLease("n1", at, 40), ObjectNew: agentLease("n1", at.Add(41*time.Second), 40)}), true},
		"another holder":            {p.Update(event.UpdateEvent{ObjectOld: agentLease("n1", at, 40), ObjectNew: newHolder}), true},
		"generic events are unused": {p.Generic(event.GenericEvent{Object: agentLease("n1", at, 40)}), false},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: passes = %v, want %v", name, tc.got, tc.want)
		}
	}
}

// TestReconcileKeepsLostAgentAfterRestart: the Reconciler of a controller
// that just started reads which nodes its MigLayout reported lost from its
// status; a node lost there stays Unknown, with no AgentReturned event,
// until its Lease is seen renewed.
func TestReconcileKeepsLostAgentAfterRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := leaseTestStart
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown, Message: "lost"}}
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	nml := ownedBy(nodeMigLayout("n1").spec(halves).status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(), ml)
	lease := agentLease("n1", now.Add(-time.Hour), 40)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml, lease).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec,
		AgentLeases: leasesOnClock(&now)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	// phase reconciles and returns n1's phase; the reconcile must ask to
	// look again within requeue (lost: a quarter lease duration; alive:
	// at the Lease's expiry).
	phase := func(requeue time.Duration) v1alpha1.GPUPhase {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > requeue {
			t.Errorf("requeue after %s, want at most %s", res.RequeueAfter, requeue)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Nodes[0].Phase
	}
	if got := phase(11 * time.Second); got != v1alpha1.PhaseUnknown {
		t.Errorf("after a restart: n1 is %s, want still Unknown", got)
	}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventAgentReturned) {
			t.Errorf("event %q with no renewal seen", e)
		}
	}
	// The agent renews: n1 is back.
	now = now.Add(5 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if got := phase(41 * time.Second); got != v1alpha1.PhaseReady {
		t.Errorf("after a renewal: n1 is %s, want Ready", got)
	}
}

// TestFailureBackoffCapped: a MigLayout whose reconcile keeps failing is
// still looked at every 30 s (its RequeueAfter, the heartbeat's recheck,
// is dropped on failure).
func TestFailureBackoffCapped(t *testing.T) {
	rl := failureRateLimiter()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	var last time.Duration
	for range 30 {
		last = rl.When(req)
	}
	if last != maxFailureBackoff {
		t.Errorf("backoff after 30 failures: %s, want %s", last, maxFailureBackoff)
	}
}

// TestLostRowsKeptFirst: status keeps 64 node rows; a lost node's row comes
// before the other nodes not Ready, so a restarted controller still knows it
// was lost (LostInStatus) when many nodes are not Ready.
func TestLostRowsKeptFirst(t *testing.T) {
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", "")
	var states []NodeState
	for i := range maxNodeRows {
		nml := nodeMigLayout(fmt.Sprintf("busy-%02d", i)).spec(halves).status(a100(0).layout("7g.80gb@0")).build()
		states = append(states, EvaluateNode(nml.Name, nml, nil, AgentHealth{}))
	}
	dead := nodeMigLayout("zz-dead").spec(halves).status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build()
	states = append(states, EvaluateNode("zz-dead", dead, nil, AgentHealth{Lost: true, Message: "lost"}))
	ml := &v1alpha1.MigLayout{}
	ApplyStatus(&ml.Status, Observation{Nodes: states})
	if !LostInStatus(ml).Has("zz-dead") {
		t.Errorf("the lost node has no row among the %d kept", len(ml.Status.Nodes))
	}
}

// TestAgentLeasesTwoOfOneNode: a long-named node upgraded from an agent
// that named its Lease with a hash keeps that old Lease (owned by the Node,
// never deleted) beside the new UID-named one; both are held by the node,
// so both are known by the node. The controller restarts (its informer
// adds both Leases) while the node's agent is lost: it stays lost, since
// neither is renewed; the stale one's resync or deletion changes nothing.
func TestAgentLeasesTwoOfOneNode(t *testing.T) {
	long := strings.Repeat("a", 240)
	now := leaseTestStart
	l := leasesOnClock(&now)
	current := agentLease(long, now.Add(-time.Hour), 40) // miglayout-agent-<UID>, renewed an hour ago
	old := agentLease(long, now.Add(-48*time.Hour), 40)  // the pre-upgrade agent's Lease
	old.Name = v1alpha1.AgentLeasePrefix + "0123456789abcdef"
	if v1alpha1.AgentLeaseNode(old) != long || v1alpha1.AgentLeaseNode(current) != long {
		t.Fatal("both Leases are the node's")
	}
	// The informer's initial list, in either order.
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		l.Forget(long)
		for _, i := range order {
			l.Observe([]*coordinationv1.Lease{current, old}[i])
		}
		// List keeps the one renewed last: current.
		if h := l.Health(long, current, true, true); !h.Lost {
			t.Errorf("informer order %v: agent lost for an hour judged back: %+v", order, h)
		}
	}
	// And while running: a resync (update event) of the old Lease.
	l.Forget(long)
	l.Observe(current)
	if h := l.Health(long, current, true, true); !h.Lost {
		t.Fatalf("baseline: %+v", h)
	}
	l.Observe(old) // resync of the stale Lease
	if h := l.Health(long, current, true, true); !h.Lost {
		t.Errorf("after a resync of the old Lease, the lost agent is judged back: %+v", h)
	}
	// A live agent: the stale Lease going is not its Lease going.
	l.Forget(long)
	fresh := agentLease(long, now, 40)
	l.Observe(agentLease(long, now.Add(-time.Second), 40))
	l.Observe(fresh)
	l.deleted(long, old.Name)
	if h := l.Health(long, fresh, true, false); h.Lost || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("after the stale Lease was deleted: %+v, want alive until %s", h, now.Add(40*time.Second))
	}
	// Its renewal is one.
	now = now.Add(30 * time.Second)
	fresh = agentLease(long, now, 40)
	if h := l.Health(long, fresh, true, false); h.Lost || !h.Recheck.Equal(now.Add(40*time.Second)) {
		t.Errorf("after a renewal: %+v, want alive until %s", h, now.Add(40*time.Second))
	}
	// The agent then dies: the stale Lease's resync, or its deletion, 30 s
	// later gives it no more time.
	expires := now.Add(40 * time.Second)
	for name, stale := range map[string]func(){
		"resync":   func() { l.Observe(old) },
		"deletion": func() { l.deleted(long, old.Name) },
	} {
		l.Forget(long)
		at := now
		l.Now = func() time.Time { return at }
		l.Observe(fresh)
		at = at.Add(30 * time.Second)
		stale()
		if h := l.Health(long, fresh, true, false); h.Lost || !h.Recheck.Equal(expires) {
			t.Errorf("after the stale Lease's %s: %+v, want alive until %s only", name, h, expires)
		}
	}
}

// TestAgentLeasesStaleCopy: a pass that listed the Lease before the
// informer's handler saw its last renewals hands Health an older copy; that
// is no renewal, and the agent is lost one lease duration after the last
// one.
func TestAgentLeasesStaleCopy(t *testing.T) {
	for name, behind := range map[string]int{"one renewal old": 1, "two renewals old": 2} {
		t.Run(name, func(t *testing.T) {
			t0 := leaseTestStart
			now := t0.Add(-time.Duration(behind) * 10 * time.Second)
			l := leasesOnClock(&now)
			stale := agentLease("n1", now, 40)
			l.Observe(stale)
			for range behind { // the handler; the agent then stops, at t0
				now = now.Add(10 * time.Second)
				l.Observe(agentLease("n1", now, 40))
			}
			last := agentLease("n1", now, 40)
			now = t0.Add(35 * time.Second)
			if h := l.Health("n1", stale, true, false); h.Lost || !h.Recheck.Equal(t0.Add(40*time.Second)) {
				t.Errorf("with an older copy, 35 s after the last renewal: %+v, want not lost, looked at again at its expiry", h)
			}
			now = t0.Add(45 * time.Second)
			if h := l.Health("n1", last, true, false); !h.Lost {
				t.Errorf("45 s after the last renewal of a 40 s Lease: %+v, want lost", h)
			}
		})
	}
}

// TestAgentLeasesClockStepsBack: the agent's node clock steps back an hour
// (NTP, a reboot before the clock is set): its renewals, with earlier
// renewTimes than the last one seen, are renewals all the same.
func TestAgentLeasesClockStepsBack(t *testing.T) {
	t0 := leaseTestStart
	now := t0
	l := leasesOnClock(&now)
	agentClock := t0
	renew := func() *coordinationv1.Lease {
		lease := agentLease("n1", agentClock, 40)
		l.Observe(lease)
		return lease
	}
	renew()
	now, agentClock = now.Add(10*time.Second), agentClock.Add(10*time.Second)
	renew()
	agentClock = agentClock.Add(-time.Hour)
	for i := range 12 {
		now, agentClock = now.Add(10*time.Second), agentClock.Add(10*time.Second)
		if h := l.Health("n1", renew(), true, false); h.Lost {
			t.Fatalf("renewal %d after the agent's clock stepped back an hour: %+v, want not lost", i, h)
		}
	}
}
