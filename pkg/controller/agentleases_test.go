package controller

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

const leaseNS = "miglayout-system"

// agentLease is node's heartbeat Lease as its agent last wrote it.
func agentLease(node string, renew time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: v1alpha1.AgentLeaseName(node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

func TestAgentLeasesHealth(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := start
	l := &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return now }}
	// The agent's clock is an hour behind: renewTime is not compared with
	// the controller's clock, only watched for change.
	skewed := start.Add(-time.Hour)
	lease := agentLease("n1", skewed, 40)
	steps := []struct {
		after   time.Duration // since start
		renewal bool          // the agent renews just before
		lost    bool
		expires time.Duration // since start, for a live agent
	}{
		{after: 0, expires: 40 * time.Second},                // first seen: renewed now
		{after: 39 * time.Second, expires: 40 * time.Second}, // not renewed, not expired yet
		{after: 40 * time.Second, lost: true},                // expired
		{after: 50 * time.Second, renewal: true, expires: 90 * time.Second},
		{after: 2 * time.Minute, lost: true},
	}
	for i, st := range steps {
		now = start.Add(st.after)
		if st.renewal {
			lease = agentLease("n1", lease.Spec.RenewTime.Add(50*time.Second), 40)
			l.Observe(lease)
		}
		h := l.Health("n1", lease, true)
		if h.Lost != st.lost {
			t.Fatalf("step %d (%s): lost = %v, want %v (%+v)", i, st.after, h.Lost, st.lost, h)
		}
		if !st.lost && !h.Expires.Equal(start.Add(st.expires)) {
			t.Errorf("step %d: expires %s, want %s", i, h.Expires, start.Add(st.expires))
		}
		if st.lost && !strings.Contains(h.Message, "has not renewed its heartbeat Lease miglayout-system/miglayout-agent-n1 since") {
			t.Errorf("step %d: message %q", i, h.Message)
		}
	}
	// A holder change counts as a renewal.
	moved := agentLease("n1", lease.Spec.RenewTime.Time, 40)
	moved.Spec.HolderIdentity = ptr.To("n1-replaced")
	if h := l.Health("n1", moved, true); h.Lost {
		t.Errorf("a new holder: %+v", h)
	}
}

func TestAgentLeasesNoLease(t *testing.T) {
	l := &AgentLeases{Namespace: leaseNS}
	if h := l.Health("n1", nil, true); !h.Lost || !strings.Contains(h.Message, "--lease-namespace=miglayout-system") {
		t.Errorf("reported, no Lease: %+v, want lost, naming the flag", h)
	}
	if h := l.Health("n1", nil, false); h.Lost {
		t.Errorf("never reported, no Lease: %+v, want not lost (not started)", h)
	}
	var off *AgentLeases
	if h := off.Health("n1", nil, true); h.Lost {
		t.Errorf("checks off: %+v", h)
	}
	if d := off.requeueAt(time.Now()); d != 0 {
		t.Errorf("checks off: requeue after %s", d)
	}
}

func TestAgentLeasesNodeHealth(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	l := &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return now }}
	renewed := now.Add(-time.Minute) // by the agent's clock
	l.Observe(agentLease("early", renewed, 40))
	now = now.Add(20 * time.Second)
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"early":  nodeMigLayout("early").status(a100(0)).build(),
		"late":   nodeMigLayout("late").status(a100(0)).build(),
		"absent": nodeMigLayout("absent").status(a100(0)).build(),
		"new":    nodeMigLayout("new").build(),
	}
	leases := map[string]*coordinationv1.Lease{
		v1alpha1.AgentLeaseName("early"): agentLease("early", renewed, 40),
		v1alpha1.AgentLeaseName("late"):  agentLease("late", now, 60),
	}
	health, soonest := l.NodeHealth(nmls, leases)
	got := map[string]bool{}
	for n, h := range health {
		got[n] = h.Lost
	}
	want := map[string]bool{"early": false, "late": false, "absent": true, "new": false}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: lost = %v, want %v", n, got[n], w)
		}
	}
	// early was seen 20 s ago with 40 s to live.
	if wantAt := now.Add(20 * time.Second); !soonest.Equal(wantAt) {
		t.Errorf("soonest expiry %s, want %s", soonest, wantAt)
	}
	if d := l.requeueAt(soonest); d != 20*time.Second+leaseExpirySlack {
		t.Errorf("requeue after %s", d)
	}
}

func TestAgentLeaseName(t *testing.T) {
	if got := v1alpha1.AgentLeaseName("gpu-node-1"); got != "miglayout-agent-gpu-node-1" {
		t.Errorf("short name: %q", got)
	}
	long := strings.Repeat("a", 240)
	got := v1alpha1.AgentLeaseName(long)
	if len(got) > 253 || !strings.HasPrefix(got, v1alpha1.AgentLeasePrefix) || got == v1alpha1.AgentLeaseName(long+"b") {
		t.Errorf("long name: %q (%d characters)", got, len(got))
	}
}

func TestAgentLeaseChange(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
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
