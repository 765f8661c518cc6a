package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestPodNominatedByPreemptionIsNotRepartitionedForElsewhere: kube-scheduler
// found room for the high-priority pod h on n1 by preempting a lower
// priority pod that holds one of n1's 3g.40gb devices: it records h
// Unschedulable with status.nominatedNodeName n1, evicts the victim, and
// binds h to the freed device once the victim's claim is released (after
// its termination grace period, 30 s by default). Meanwhile the device is
// still allocated, so n1 looks full. h's demand is met by the preemption
// under way: Auto mode must not repartition n2's free 7g.80gb for it (the
// agent would destroy that free device a few seconds later, for a pod
// that is about to run on n1), nor tell h it waits for n2's repartition.
// (The cluster autoscaler likewise counts a pod with a nominated node as
// going there.)
func TestPodNominatedByPreemptionIsNotRepartitionedForElsewhere(t *testing.T) {
	tests := map[string]struct {
		nominated string
		// wantN2Change: n2/gpu-0 is repartitioned for h.
		wantN2Change bool
	}{
		// Without a nomination h has no place yet: n2 is repartitioned.
		"not nominated":                {nominated: "", wantN2Change: true},
		"nominated to n1 (preempting)": {nominated: "n1", wantN2Change: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			h := autoPod("h", h0(), "c1")
			h.Spec.Priority = ptr.To(int32(1000))
			h.Status.NominatedNodeName = tc.nominated
			c := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}),
				autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
				node("n2", map[string]string{"pool": "auto"}),
				autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
				autoClaim("c1", profileSelector("3g.40gb")), h)
			c.settle()
			got := c.specOf("n2")
			if tc.wantN2Change {
				// Where on n2 is the planner's choice.
				if len(got) != 1 {
					t.Errorf("n2 spec %v: want n2/gpu-0 repartitioned for h", got)
				}
				return
			}
			if diff := cmp.Diff(map[int32]string{}, got); diff != "" {
				var evs []string
				for _, e := range c.events() {
					if strings.Contains(e, EventWaitingForRepartition) {
						evs = append(evs, e)
					}
				}
				t.Errorf("h is nominated to n1 (preemption under way), yet n2 is repartitioned for it (-want +got spec):\n%s\nevents told to h: %q", diff, evs)
			}
		})
	}
}
