package main

import (
	"strings"
	"testing"
)

// TestValidateBoundaries: the values at the edge of what each flag wants.
// A batch window may be as long as its idle time but not empty, the
// durations a 0 turns off accept 0 and refuse less, leader election wants
// its lease longer than the renew deadline and that longer than 1.2 retry
// periods (client-go refuses the equal values), and --scheduler-lease
// wants both a namespace and a name: the namespace a DNS label (no dots),
// the name a DNS subdomain (dots allowed).
func TestValidateBoundaries(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // "" for valid
	}{
		"batch idle of 0":                    {[]string{"--auto-batch-idle=0"}, "--auto-batch-idle"},
		"batch max equal to idle":            {[]string{"--auto-batch-idle=5s", "--auto-batch-max=5s"}, ""},
		"read every, aging, unbound off":     {[]string{"--auto-read-every=0", "--auto-aging-after=0", "--auto-unbound-after=0"}, ""},
		"negative read every":                {[]string{"--auto-read-every=-1ms"}, "--auto-read-every"},
		"negative aging after":               {[]string{"--auto-aging-after=-1m"}, "--auto-aging-after"},
		"renew deadline equal to lease":      {[]string{"--leader-elect-lease-duration=10s"}, "--leader-elect-lease-duration"},
		"lease under a second":               {[]string{"--leader-elect-lease-duration=900ms", "--leader-elect-renew-deadline=600ms", "--leader-elect-retry-period=100ms"}, "--leader-elect-lease-duration"},
		"lease of a second":                  {[]string{"--leader-elect-lease-duration=1s", "--leader-elect-renew-deadline=600ms", "--leader-elect-retry-period=100ms"}, ""},
		"lease under a second, no election":  {[]string{"--leader-elect=false", "--leader-elect-lease-duration=900ms", "--leader-elect-renew-deadline=600ms", "--leader-elect-retry-period=100ms"}, ""},
		"renew deadline 1.2 × retry":         {[]string{"--leader-elect-renew-deadline=12s", "--leader-elect-retry-period=10s", "--leader-elect-lease-duration=20s"}, "--leader-elect-renew-deadline"},
		"renew deadline just over 1.2×retry": {[]string{"--leader-elect-renew-deadline=12001ms", "--leader-elect-retry-period=10s", "--leader-elect-lease-duration=20s"}, ""},
		"scheduler lease without namespace":  {[]string{"--scheduler-lease=/kube-scheduler"}, "--scheduler-lease"},
		"scheduler lease without name":       {[]string{"--scheduler-lease=kube-system/"}, "--scheduler-lease"},
		"no scheduler lease":                 {[]string{"--scheduler-lease="}, ""},
		"scheduler lease namespace not name": {[]string{"--scheduler-lease=Kube_System/kube-scheduler"}, "--scheduler-lease"},
		"scheduler lease namespace dotted":   {[]string{"--scheduler-lease=kube.system/kube-scheduler"}, "--scheduler-lease"},
		"scheduler lease name dotted":        {[]string{"--scheduler-lease=kube-system/kube-scheduler.example.com"}, ""},
		"scheduler lease name not a name":    {[]string{"--scheduler-lease=kube-system/Kube_Scheduler"}, "--scheduler-lease"},
		"agent lease namespace":              {[]string{"--agent-lease-namespace=miglayout-system"}, ""},
		"agent lease namespace not a name":   {[]string{"--agent-lease-namespace=miglayout.system"}, "--agent-lease-namespace"},
		"leader election namespace not name": {[]string{"--leader-election-namespace=Miglayout"}, "--leader-election-namespace"},
		"no leader election id":              {[]string{"--leader-election-id="}, "--leader-election-id"},
		"leader election id not a name":      {[]string{"--leader-election-id=miglayout controller"}, "--leader-election-id"},
		"no id without leader election":      {[]string{"--leader-elect=false", "--leader-election-id="}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := parseFlags(t, tc.args).validate()
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
