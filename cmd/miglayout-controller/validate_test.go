package main

import (
	"context"
	"strings"
	"testing"
)

// TestValidate: flag values the manager would refuse only once started, or
// the planner would quietly replace, are refused by name before the API
// server is contacted (run fails with the flag's error, not with the
// kubeconfig's); the defaults pass.
func TestValidate(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // "" for valid
	}{
		"defaults":                     {nil, ""},
		"metrics off":                  {[]string{"--metrics-bind-address=0"}, ""},
		"no leader election":           {[]string{"--leader-elect=false", "--leader-elect-retry-period=0"}, ""},
		"driver name":                  {[]string{"--driver-name=Not_Valid"}, "--driver-name"},
		"scheduler lease":              {[]string{"--scheduler-lease=bad"}, "--scheduler-lease"},
		"metrics address":              {[]string{"--metrics-bind-address=bogus"}, "--metrics-bind-address"},
		"probe address":                {[]string{"--health-probe-bind-address=:99999"}, "--health-probe-bind-address"},
		"negative batch idle":          {[]string{"--auto-batch-idle=-5s"}, "--auto-batch-idle"},
		"batch max below idle":         {[]string{"--auto-batch-idle=30s", "--auto-batch-max=1s"}, "--auto-batch-max"},
		"negative unbound after":       {[]string{"--auto-unbound-after=-1m"}, "--auto-unbound-after"},
		"renew deadline ≥ lease":       {[]string{"--leader-elect-renew-deadline=20s"}, "--leader-elect-lease-duration"},
		"renew deadline ≤ 1.2 × retry": {[]string{"--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=9s"}, "--leader-elect-renew-deadline"},
		"no retry period":              {[]string{"--leader-elect-retry-period=0"}, "--leader-elect-retry-period"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := parseFlags(t, tc.args)
			err := o.validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("validate: %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate: %v, want an error naming %s", err, tc.want)
			}
			// No kubeconfig is needed to be told.
			t.Setenv("KUBECONFIG", "/nonexistent")
			if err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want the flag's error", err)
			}
		})
	}
}
