package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

func TestManagerOptions(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []any
	}{
		"defaults": {
			want: []any{":8080", ":8081", true, "miglayout-controller.miglayout.io", "", 15 * time.Second, "spec.driver!=mig.miglayout.io", "spec.nodeName=", "not cached", true},
		},
		"flags": {
			args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=:9440", "--leader-elect=false",
				"--leader-election-id=x", "--leader-election-namespace=kube-system", "--leader-elect-lease-duration=30s", "--driver-name=gpu.example.com",
				"--agent-lease-namespace=miglayout-system"},
			want: []any{"0", ":9440", false, "x", "kube-system", 30 * time.Second, "spec.driver!=gpu.example.com", "spec.nodeName=", "[miglayout-system]", true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := parseFlags(t, tc.args)
			s, err := newScheme()
			if err != nil {
				t.Fatal(err)
			}
			m := o.managerOptions(s)
			// The cache selects ResourceSlices by driver, pods not bound
			// yet, and Leases of the agents' namespace only.
			bySlices, byPods, leases := "", "", "not cached"
			for obj, by := range m.Cache.ByObject {
				switch obj.(type) {
				case *resourceapi.ResourceSlice:
					if by.Field != nil {
						bySlices = by.Field.String()
					}
				case *corev1.Pod:
					if by.Field != nil {
						byPods = by.Field.String()
					}
				case *coordinationv1.Lease:
					leases = fmt.Sprint(slices.Sorted(maps.Keys(by.Namespaces)))
				}
			}
			got := []any{m.Metrics.BindAddress, m.HealthProbeBindAddress, m.LeaderElection, m.LeaderElectionID, m.LeaderElectionNamespace, *m.LeaseDuration, bySlices, byPods, leases, m.Cache.DefaultTransform != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("manager options (-want +got):\n%s", diff)
			}
			if !m.LeaderElectionReleaseOnCancel {
				t.Error("LeaderElectionReleaseOnCancel is off")
			}
		})
	}
}

// TestAutoPlannerOptions: the Auto planner's durations from the flags, 0
// turning a check off.
func TestAutoPlannerOptions(t *testing.T) {
	type durations struct{ Idle, Max, Aging, Unbound, Declined time.Duration }
	tests := map[string]struct {
		args []string
		want durations
	}{
		"defaults": {want: durations{2 * time.Second, 10 * time.Second, time.Hour, time.Minute, 10 * time.Minute}},
		"set": {args: []string{"--auto-batch-idle=1s", "--auto-batch-max=5s", "--auto-aging-after=30m", "--auto-unbound-after=2m", "--auto-declined-for=1h"},
			want: durations{time.Second, 5 * time.Second, 30 * time.Minute, 2 * time.Minute, time.Hour}},
		"off": {args: []string{"--auto-aging-after=0", "--auto-unbound-after=0"},
			want: durations{2 * time.Second, 10 * time.Second, -1, -1, 10 * time.Minute}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := parseFlags(t, tc.args)
			a := o.autoPlanner(nil)
			got := durations{a.Idle, a.Max, a.AgingAfter, a.UnboundAfter, a.DeclinedFor}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Auto planner durations (-want +got):\n%s", diff)
			}
		})
	}
}

// parseFlags is the options args set.
func parseFlags(t *testing.T, args []string) *options {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}
