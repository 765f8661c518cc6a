package main

import (
	"strings"
	"testing"
	"time"
)

// TestPlanAutoBoundsDeclinedNodesByTheFlag: a SchedulerDeclinedNode event
// leaves its node out of the pod's plans for at most 8 times
// --auto-declined-for, whatever length its note gives, as the controller
// reads it back: with --auto-declined-for 1m, a node left out "for 10m0s"
// 9 minutes ago is back in the pod's plans, one left out a minute ago is
// not.
func TestPlanAutoBoundsDeclinedNodesByTheFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		ago  time.Duration
		want string
	}{
		"within the bound": {time.Minute, "serves:   ml/small"},
		"past the bound":   {9 * time.Minute, "ml/small fits existing free devices on node-a"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := append(declinedCluster(), declinedEvent("uid-small", tc.ago))
			out, _, err := runWith(t, objs, "plan", "--auto-declined-for", "1m", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("node-a left out %s ago for 10m0s, --auto-declined-for 1m: plan does not say %q:\n%s", tc.ago, tc.want, out)
			}
		})
	}
}

// TestPlanAutoDeclinedForZeroIsTheDefault: --auto-declined-for 0 (or less)
// is the controller's default, 10m, as the controller takes its flag of
// that name: a node left out "for 10m0s" a minute ago stays out.
func TestPlanAutoDeclinedForZeroIsTheDefault(t *testing.T) {
	for _, flag := range []string{"0", "-1m"} {
		objs := append(declinedCluster(), declinedEvent("uid-small", time.Minute))
		out, _, err := runWith(t, objs, "plan", "--auto-declined-for="+flag, "-f", "testdata/plan-auto.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if want := "serves:   ml/small"; !strings.Contains(out, want) {
			t.Errorf("--auto-declined-for=%s, node-a left out a minute ago for 10m0s: plan does not say %q:\n%s", flag, want, out)
		}
	}
}
