package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSchedulerDeclinedNode: n1 has a free 1g.10gb and n2 a whole GPU. A
// pod asking for a 1g.10gb is given n1's as it is. When kube-scheduler does
// not bind it there for UnboundAfter (another pod's anti-affinity, say,
// which the planner does not judge), n1 is declined for the pod: it hears
// why, and a 1g.10gb is made for it on n2 in the same pass. Not before
// UnboundAfter, not for a pod bound meanwhile or nominated to n1 by a
// preemption, and not with the check turned off. With n1 the only node,
// the pod hears that no node is left; after DeclinedFor n1 is tried again.
func TestSchedulerDeclinedNode(t *testing.T) {
	const free = "4g.40gb@0,1g.10gb@6"
	for name, tc := range map[string]struct {
		onlyN1    bool
		nominated bool
		bound     bool
		off       bool
		draining  bool   // n1's GPU is not Ready: its devices carry the drain taint
		declined  bool   // n1 is declined for the pod
		n2        string // n2's desired layout after UnboundAfter
	}{
		"not bound where its device waits": {declined: true, n2: "1g.10gb@6"},
		"bound meanwhile":                  {bound: true, n2: "7g.80gb@0"},
		"nominated there":                  {nominated: true, n2: "7g.80gb@0"},
		"the check turned off":             {off: true, n2: "7g.80gb@0"},
		"its GPU draining":                 {draining: true, n2: "7g.80gb@0"},
		"the only node":                    {onlyN1: true, declined: true},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			g := a100(0).layout(free)
			if tc.draining {
				g = g.phase(v1alpha1.PhaseDraining, "", "")
			}
			objs := []client.Object{node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, g)}
			if !tc.onlyN1 {
				objs = append(objs, node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
			}
			h := newAutoCluster(t, ml, objs...)
			if tc.off {
				h.a.UnboundAfter = -1
			}
			p := autoPod("p", h.now, "c1")
			if tc.nominated {
				p.Status.NominatedNodeName = "n1"
			}
			h.create(autoClaim("c1", profileSelector("1g.10gb")), p)
			declinedBefore := testutil.ToFloat64(schedulerDeclinedMetric)

			requeue := h.settle()
			if !tc.off && !tc.draining && requeue != DefaultUnboundAfter {
				t.Errorf("after the plan that gives the pod n1's free 1g.10gb, asked to look again in %s, want %s", requeue, DefaultUnboundAfter)
			}
			h.now = h.now.Add(DefaultUnboundAfter / 2)
			requeue = h.settle()
			if !tc.onlyN1 {
				if got := h.specOf("n2")[0]; got != "" && got != "7g.80gb@0" {
					t.Fatalf("n2 changed to %q before the pod's device waited %s", got, DefaultUnboundAfter)
				}
			}
			if tc.bound {
				p := h.pod("p")
				p.Spec.NodeName = "n1"
				if err := h.c.Update(context.Background(), p); err != nil {
					t.Fatal(err)
				}
			}
			h.events()
			if tc.off || tc.draining {
				requeue = DefaultUnboundAfter
			} else if requeue != DefaultUnboundAfter/2 {
				t.Errorf("half way, asked to look again in %s, want %s", requeue, DefaultUnboundAfter/2)
			}
			h.now = h.now.Add(requeue)
			h.settle()

			if !tc.onlyN1 {
				got := h.specOf("n2")[0]
				if got == "" {
					got = "7g.80gb@0"
				}
				if got != tc.n2 {
					t.Errorf("n2's desired layout %q, want %q", got, tc.n2)
				}
			}
			if got := h.specOf("n1")[0]; got != "" && got != free {
				t.Errorf("n1's desired layout %q, want it left as %q", got, free)
			}
			evs := strings.Join(h.events(), "\n")
			if got := strings.Contains(evs, EventSchedulerDeclinedNode) && strings.Contains(evs, "waited on node n1 for 1m"); got != tc.declined {
				t.Errorf("event %s naming n1: %t, want %t; events:\n%s", EventSchedulerDeclinedNode, got, tc.declined, evs)
			}
			if got, want := testutil.ToFloat64(schedulerDeclinedMetric)-declinedBefore, map[bool]float64{true: 1}[tc.declined]; got != want {
				t.Errorf("scheduler_declined_nodes_total rose by %v, want %v", got, want)
			}
			if !tc.onlyN1 {
				return
			}
			if !strings.Contains(evs, planner.DeclinedEverywhere) {
				t.Errorf("no event saying that no node is left; events:\n%s", evs)
			}
			if st := h.autoStatus(); st == nil || st.NotServablePods != 1 {
				t.Errorf("Auto status %+v, want the pod not servable", st)
			}
			h.now = h.now.Add(DefaultDeclinedFor)
			h.settle()
			if st := h.autoStatus(); st == nil || st.NotServablePods != 0 || st.PendingPods != 1 {
				t.Errorf("Auto status %+v %s after n1 was declined, want the pod pending and servable again", st, DefaultDeclinedFor)
			}
		})
	}
}

// pod reads pod ns/name.
func (h *autoCluster) pod(name string) *corev1.Pod {
	h.t.Helper()
	var p corev1.Pod
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		h.t.Fatal(err)
	}
	return &p
}
