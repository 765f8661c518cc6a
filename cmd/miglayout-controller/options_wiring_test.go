package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
)

// TestManagerOptionsLeaderElectionTimings: the lease duration, renew
// deadline and retry period reach leader election each as its own flag
// says, 15 s, 10 s and 2 s by default (the chart's
// controller.leaderElection values).
func TestManagerOptionsLeaderElectionTimings(t *testing.T) {
	tests := map[string]struct {
		args []string
		want [3]time.Duration
	}{
		"defaults": {want: [3]time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second}},
		"set": {args: []string{"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=30s", "--leader-elect-retry-period=5s"},
			want: [3]time.Duration{time.Minute, 30 * time.Second, 5 * time.Second}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := parseFlags(t, tc.args).managerOptions(nil)
			got := [3]time.Duration{*m.LeaseDuration, *m.RenewDeadline, *m.RetryPeriod}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lease duration, renew deadline, retry period (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManagerOptionsBoundReconciles: each Reconcile's context ends: one
// stuck on a call that never answers is retried, not left holding the
// leader's work while its Lease is renewed.
func TestManagerOptionsBoundReconciles(t *testing.T) {
	if got := parseFlags(t, nil).managerOptions(nil).Controller.ReconciliationTimeout; got <= 0 {
		t.Errorf("ReconciliationTimeout = %v, want a bound", got)
	}
}

// TestAutoPlannerDriverAndAgentLeases: the Auto planner plans for the
// devices of --driver-name and judges agents by the Leases it is given.
func TestAutoPlannerDriverAndAgentLeases(t *testing.T) {
	leases := &controller.AgentLeases{Namespace: "miglayout-system"}
	a, err := parseFlags(t, []string{"--driver-name=gpu.example.com"}).autoPlanner(leases)
	if err != nil {
		t.Fatal(err)
	}
	if a.Driver != "gpu.example.com" {
		t.Errorf("Auto planner driver %q, want gpu.example.com", a.Driver)
	}
	if a.AgentLeases != leases {
		t.Errorf("Auto planner agent Leases %v, want %v", a.AgentLeases, leases)
	}
}

// TestSchemeKnowsTheMiglayoutAPI: the manager's scheme knows the
// miglayout kinds the reconciler and the Auto planner read and write, and
// the built-in ones.
func TestSchemeKnowsTheMiglayoutAPI(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		v1alpha1.GroupVersion.WithKind("MigLayout"),
		v1alpha1.GroupVersion.WithKind("NodeMigLayout"),
		corev1.SchemeGroupVersion.WithKind("Pod"),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}

// TestNodesTrimmedInCacheDropAttachedVolumes: the volumes attached to a
// Node, which nothing here reads, are dropped from the cached Node too.
func TestNodesTrimmedInCacheDropAttachedVolumes(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/v", DevicePath: "/dev/sdb"}}}}
	got, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	if va := got.(*corev1.Node).Status.VolumesAttached; va != nil {
		t.Errorf("cached Node keeps attached volumes %v", va)
	}
}
