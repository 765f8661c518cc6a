package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestPodNominatedByPreemptionIsNotRepartitionedForElsewhere: the
// high-priority pod h is nominated to n1 (status.nominatedNodeName: the
// scheduler preempts pods there and binds h once they are gone). h is
// planned on n1 only: with n1's 3g.40gb devices in use now, it waits there,
// and n2's free 7g.80gb is not destroyed for a pod about to run on n1 (the
// cluster autoscaler likewise counts a pod with a nominated node as going
// there). Without the nomination, n2 is repartitioned for it.
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

// TestNominatedPodKeepsTheFreeDeviceItWaitsFor: kube-scheduler nominates a
// pod to a node only where the pod fits once its victims are gone; with
// DRA, that is a node where a device for its claim is free already (the
// dynamicresources plugin has no PreFilterExtensions, so preemption never
// frees an allocated device). Here the high-priority pod h waits on n1
// (nominated there: the victims it preempts free CPU, not a device) for
// n1's free 3g.40gb@4. Another pending pod, p, asks for a 1g.10gb, which
// n1 can only make by destroying that 3g.40gb@4.
// The plan keeps the free 3g.40gb@4 for h, nominated or not: destroying it
// for the lower-priority p would undo the preemption (h fails again, its
// victims evicted for nothing).
func TestNominatedPodKeepsTheFreeDeviceItWaitsFor(t *testing.T) {
	for name, nominated := range map[string]string{
		"not nominated":   "",
		"nominated to n1": "n1",
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			h := autoPod("h", h0(), "c1")
			h.Spec.Priority = ptr.To(int32(1000))
			h.Status.NominatedNodeName = nominated
			p := autoPod("p", h0(), "c2")
			c := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}),
				autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0")),
				autoClaim("c1", profileSelector("3g.40gb")), h,
				autoClaim("c2", profileSelector("1g.10gb")), p)
			c.settle()
			if diff := cmp.Diff(map[int32]string{}, c.specOf("n1")); diff != "" {
				t.Errorf("n1 is repartitioned, destroying the free 3g.40gb@4 that h (nominated %q) waits for, for the lower-priority p (-want +got spec):\n%s\nevents: %q",
					nominated, diff, c.events())
			}
		})
	}
}

// TestPodNominatedOutsideAutoIsNotReportedUnservable: kube-scheduler
// nominated h to n9, a node no Auto MigLayout manages (a Static node, or
// one without miglayout's GPUs, where its victims free the room). h runs
// there once its victims are gone: it is no Auto demand, and is not told it
// can never be served (Warning NotServable, counted in
// status.auto.notServablePods).
func TestPodNominatedOutsideAutoIsNotReportedUnservable(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := autoPod("h", h0(), "c1")
	h.Spec.Priority = ptr.To(int32(1000))
	h.Status.NominatedNodeName = "n9"
	c := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		node("n9", map[string]string{"pool": "static"}),
		autoClaim("c1", profileSelector("3g.40gb")), h)
	c.settle()
	for _, e := range c.events() {
		if strings.Contains(e, EventNotServable) {
			t.Errorf("h, nominated to n9 (outside Auto, preemption under way), is told it can never be served: %q", e)
		}
	}
	if st := c.autoStatus(); st != nil && st.NotServablePods != 0 {
		t.Errorf("status.auto.notServablePods = %d, want 0: h is about to run on n9", st.NotServablePods)
	}
}
