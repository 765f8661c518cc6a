package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAgentLeasesExpiredAtSight: a Lease first seen expired by its own
// renewTime gets the grace of a lease duration, untrusted: Unconfirmed
// (not Lost), looked at again every quarter of its duration, until a
// renewal is seen (alive) or the grace ends (lost). A Lease first seen
// within its duration is trusted, and one of an agent reported lost before
// stays lost.
func TestAgentLeasesExpiredAtSight(t *testing.T) {
	start := leaseTestStart
	tests := map[string]struct {
		renew   time.Duration // the Lease's renewTime, from start
		wasLost bool
		// renewedAt, where set, is when a renewal is seen (from start).
		renewedAt time.Duration
		at        time.Duration // when judged, from start
		want      AgentHealth   // Message only checked for being set
	}{
		"expired at sight":        {renew: -time.Minute, at: 0, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(10 * time.Second)}},
		"expired at sight, later": {renew: -time.Minute, at: 35 * time.Second, want: AgentHealth{Unconfirmed: true, Recheck: start.Add(40 * time.Second)}},
		"expired at sight, grace over": {renew: -time.Minute, at: 40 * time.Second,
			want: AgentHealth{Lost: true, Recheck: start.Add(50 * time.Second)}},
		"expired at sight, then renewed": {renew: -time.Minute, renewedAt: 5 * time.Second, at: 6 * time.Second,
			want: AgentHealth{Recheck: start.Add(45 * time.Second)}},
		"within its duration at sight": {renew: -39 * time.Second, at: 0, want: AgentHealth{Recheck: start.Add(40 * time.Second)}},
		"reported lost before":         {renew: -time.Minute, wasLost: true, at: 0, want: AgentHealth{Lost: true, Recheck: start.Add(10 * time.Second)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := start
			l := leasesOnClock(&now)
			lease := agentLease("n1", start.Add(tc.renew), 40)
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
			if tc.want.Unconfirmed && !strings.Contains(got.Message, "had expired by its renewTime") {
				t.Errorf("message %q does not say the Lease had expired", got.Message)
			}
			got.Message = ""
			if got != tc.want {
				t.Errorf("health %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRestartedControllerGivesNoTurnToAnAgentExpiredAtSight: a controller
// that starts while a rule change waits, with maxNodesChanging 1, finds
// n1's Lease expired by its own renewTime (its agent died while no
// controller ran, or was lost beyond the status rows that say so) and
// n2's renewed: the turn goes to n2, and n1's row says why it waits; once
// n1's agent is seen renewing, n1 takes the next turn.
func TestRestartedControllerGivesNoTurnToAnAgentExpiredAtSight(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := leaseTestStart
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml}
	for _, name := range []string{"n1", "n2"} {
		nml := ownedBy(nodeMigLayout(name).spec(specGPU(0, "7g.80gb@0", "")).status(a100(0).layout("7g.80gb@0")).build(), ml)
		objs = append(objs, node(name, map[string]string{"pool": "a"}), nml)
	}
	dead := agentLease("n1", now.Add(-10*time.Minute), 40)
	objs = append(objs, dead, agentLease("n2", now, 40))
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: leasesOnClock(&now), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	layout := func(name string) string {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &nml); err != nil {
			t.Fatal(err)
		}
		return nml.Spec.GPUs[0].Layout
	}
	reconcile()
	if got := layout("n1"); got != "7g.80gb@0" {
		t.Errorf("n1, whose agent may be lost, given %s", got)
	}
	if got := layout("n2"); got == "7g.80gb@0" {
		t.Error("n2 not given the turn n1 could not take")
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
	if err := c.Get(ctx, client.ObjectKeyFromObject(dead), dead); err != nil {
		t.Fatal(err)
	}
	dead.Spec.RenewTime.Time = now
	if err := c.Update(ctx, dead); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := layout("n1"); got == "7g.80gb@0" {
		t.Error("n1 not given its turn once its agent renewed")
	}
}
