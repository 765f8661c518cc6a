package main

import (
	"strings"
	"testing"
)

// TestSchedulerLeaseNamespaceIsALabel: the namespace of --scheduler-lease
// must be a namespace name (a DNS label: no dots), while its Lease name may
// be a DNS subdomain (dots allowed).
func TestSchedulerLeaseNamespaceIsALabel(t *testing.T) {
	tests := map[string]struct {
		lease string
		want  string // "" for valid
	}{
		"namespace with a dot": {"kube.system/kube-scheduler", "--scheduler-lease"},
		"name with a dot":      {"kube-system/kube-scheduler.example.com", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := parseFlags(t, []string{"--scheduler-lease=" + tc.lease}).validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("validate: %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
