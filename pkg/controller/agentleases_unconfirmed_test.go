package controller

import (
	"strings"

	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAgentLeasesUnconfirmedUntilRenewed: a Lease first seen as the
// process starts gets the grace of a lease duration, untrusted:
// Unconfirmed (not Lost), looked at again every quarter of its duration,
// until a renewal is seen (alive) or the grace ends (lost), whatever its
// renewTime says (the agent's clock); one of an agent reported lost before
// stays lost. A Lease first seen a lease duration after the process first
// looked at one was made while it watched: trusted.
func TestAgentLeasesUnconfirmedUntilRenewed(t *testing.T) {
	start := leaseTestStart
	tests := map[string]struct {
		renew   time.Duration // the Lease's renewTime, from start
		noRenew bool          // the Lease has no renewTime
		wasLost bool
		// renewedAt, where set, is when a renewal is seen (from start).
		renewedAt time.Duration
		// firstSeen is when the Lease is first seen (from start; another
		// Lease is seen at start).
		firstSeen time.Duration
		at        time.Duration // when judged, from start
		want      AgentHealth   // Message only checked for being set
	}{
		"first seen":                           {at: 0, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(10 * time.Second)}},
		"first seen, expired by its renewTime": {renew: -time.Minute, at: 0, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(10 * time.Second)}},
		"first seen, renewTime ahead":          {renew: 10 * time.Minute, at: 0, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(10 * time.Second)}},
		"first seen, no renewTime":             {noRenew: true, at: 0, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(10 * time.Second)}},
		"later, no renewal":                    {at: 35 * time.Second, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(40 * time.Second)}},
		"grace over":                           {at: 40 * time.Second, want: AgentHealth{Lost: true, Recheck: start.Add(50 * time.Second)}},
		"renewed":                              {renew: -time.Minute, renewedAt: 5 * time.Second, at: 6 * time.Second, want: AgentHealth{Recheck: start.Add(45 * time.Second)}},
		"reported lost before":                 {wasLost: true, at: 0, want: AgentHealth{Lost: true, Recheck: start.Add(10 * time.Second)}},
		"first seen within a lease duration of the start": {renew: 39 * time.Second, firstSeen: 39 * time.Second, at: 39 * time.Second,
			want: AgentHealth{Unconfirmed: true, Recheck: start.Add(49 * time.Second)}},
		"first seen a lease duration after the start": {renew: time.Minute, firstSeen: time.Minute, at: time.Minute,
			want: AgentHealth{Recheck: start.Add(100 * time.Second)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := start
			l := leasesOnClock(&now)
			l.Observe(agentLease("n0", start, 40))
			now = start.Add(tc.firstSeen)
			lease := agentLease("n1", start.Add(tc.renew), 40)
			if tc.noRenew {
				lease.Spec.RenewTime = nil
			}
			l.Observe(lease)
			if tc.renewedAt != 0 {
				now = start.Add(tc.renewedAt)
				lease = agentLease("n1", lease.Spec.RenewTime.Add(tc.renewedAt), 40)
				l.Observe(lease)
			}
			now = start.Add(tc.at)
			got := l.Health("n1", lease, true, tc.wasLost)
			if (got.Message != "") != (tc.want.Lost || tc.want.Unconfirmed) {
				t.Errorf("message %q", got.Message)
			}
			if tc.want.Unconfirmed && !strings.Contains(got.Message, "has seen no renewal") {
				t.Errorf("message %q does not say no renewal was seen", got.Message)
			}
			got.Message = ""
			if got != tc.want {
				t.Errorf("health %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRestartedControllerGivesTurnsOnlyToRenewingAgents: a controller
// that starts while a rule change waits, with maxNodesChanging 1, gives no
// turn before it sees an agent renew its Lease: n1's agent died 35 s
// before the start (its Lease not expired yet), n2's is alive. The turn
// goes to n2 once it renews, and n1's row says why it waits; once n1's
// agent is seen renewing, n1 takes the next turn.
func TestRestartedControllerGivesTurnsOnlyToRenewingAgents(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := leaseTestStart
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml}
	for _, name := range []string{"n1", "n2"} {
		nml := ownedBy(nodeMigLayout(name).spec(specGPU(0, "7g.80gb@0", "")).status(a100(0).layout("7g.80gb@0")).build(), ml)
		objs = append(objs, node(name, map[string]string{"pool": "a"}), nml)
	}
	dead, live := agentLease("n1", now.Add(-35*time.Second), 40), agentLease("n2", now, 40)
	objs = append(objs, dead, live)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: leasesOnClock(&now), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	reconcile := func() {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second+leaseExpirySlack {
			t.Errorf("asked to look again in %v, want within a quarter of the Leases' duration (10s) and slack", res.RequeueAfter)
		}
	}
	layouts := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, name := range []string{"n1", "n2"} {
			var nml v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: name}, &nml); err != nil {
				t.Fatal(err)
			}
			out[name] = nml.Spec.GPUs[0].Layout
		}
		return out
	}
	renew := func(l *coordinationv1.Lease) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime.Time = now
		if err := c.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	const whole, halves = "7g.80gb@0", "3g.40gb@0,3g.40gb@4"

	reconcile()
	if diff := cmp.Diff(map[string]string{"n1": whole, "n2": whole}, layouts()); diff != "" {
		t.Errorf("before any renewal (-want +got):\n%s", diff)
	}
	now = now.Add(5 * time.Second)
	renew(live)
	reconcile()
	if diff := cmp.Diff(map[string]string{"n1": whole, "n2": halves}, layouts()); diff != "" {
		t.Errorf("after n2's renewal (-want +got):\n%s", diff)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" && !strings.Contains(row.Message, unconfirmedNote) {
			t.Errorf("n1's row %q does not say why it waits", row.Message)
		}
		if row.Node == "n1" && row.Phase == v1alpha1.PhaseUnknown {
			t.Errorf("n1 reported lost before its Lease's grace ended: %+v", row)
		}
	}

	// n2 is done; n1's agent comes back and renews.
	var n2 v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &n2); err != nil {
		t.Fatal(err)
	}
	n2.Status.GPUs[0].Layout = n2.Spec.GPUs[0].Layout
	if err := c.Status().Update(ctx, &n2); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second)
	renew(dead)
	renew(live)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"n1": halves, "n2": halves}, layouts()); diff != "" {
		t.Errorf("after n1's renewal (-want +got):\n%s", diff)
	}
}
