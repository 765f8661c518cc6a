package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
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
			if tc.nominated && requeue <= DefaultUnboundAfter {
				t.Errorf("a pod nominated to n1: asked to look again in %s, as though its wait could fall due", requeue)
			}
			if !tc.off && !tc.draining && !tc.nominated && requeue != DefaultUnboundAfter {
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
			if tc.off || tc.draining || tc.nominated {
				requeue = DefaultUnboundAfter
			} else if requeue != DefaultUnboundAfter/2 {
				t.Errorf("half way, asked to look again in %s, want %s", requeue, DefaultUnboundAfter/2)
			}
			h.now = h.now.Add(requeue)
			if tc.nominated {
				// Its wait is never due; a plan for another pod does
				// not decline n1 either.
				h.create(autoClaim("c2", profileSelector("9g.90gb")), autoPod("q", h.now, "c2"))
			}
			requeue = h.settle()
			declinedAt := h.now
			if tc.onlyN1 {
				// The pass planned the inputs with the node declined
				// (and wrote nothing): the next plans them again only
				// if something changes.
				runs := plannerRuns(t)
				for range 2 {
					if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
						t.Fatal(err)
					}
					h.now = h.now.Add(h.a.idle())
				}
				h.now = declinedAt
				if got := plannerRuns(t) - runs; got != 0 {
					t.Errorf("the pass after the decline ran the planner %d time(s), want none", got)
				}
			}

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
			if got := strings.Contains(evs, EventSchedulerDeclinedNode) && strings.Contains(evs, "node n1 is left out") && strings.Contains(evs, "waited there for 1m"); got != tc.declined {
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
			// The controller asks to look again when the decline ends,
			// and n1 is tried again then.
			for i := 0; h.now.Before(declinedAt.Add(DefaultDeclinedFor)) && i < 10; i++ {
				h.now = h.now.Add(requeue)
				requeue = h.settle()
			}
			if late := h.now.Sub(declinedAt.Add(DefaultDeclinedFor)); late > 2*time.Second {
				t.Errorf("n1 tried again %s after its decline ended", late)
			}
			if st := h.autoStatus(); st == nil || st.NotServablePods != 0 || st.PendingPods != 1 {
				t.Errorf("Auto status %+v once n1's decline ended, want the pod pending and servable again", st)
			}
			// Declined again, for twice as long.
			h.events()
			h.now = h.now.Add(requeue)
			h.settle()
			if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "node n1 is left out of the pod's plans for 20m0s") {
				t.Errorf("n1 declined a second time: want an event keeping it out for 20m0s; events:\n%s", evs)
			}
		})
	}
}

// plannerRuns is how many plans miglayout_planner_duration_seconds has
// timed.
func plannerRuns(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := plannerLatency.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestDeclineWaitPauses: while another change of its GPU is under way
// (the GPU not Ready), the time a pod's free device waits stops counting,
// even through a plan then, and goes on from where it was once the GPU is
// Ready, rather than starting again: a GPU changed for other pods every
// minute does not keep the node from ever being declined. Each pass counts
// up to its time, the batching windows included.
func TestDeclineWaitPauses(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
	start := h.now
	at := func(d time.Duration) time.Duration {
		h.now = start.Add(d)
		return h.settle()
	}
	phase := func(p v1alpha1.GPUPhase) {
		h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
			st[0].Phase = p
			return st
		})
	}
	unservable := func(name string) {
		h.create(autoClaim(name, profileSelector("9g.90gb")), autoPod(name, h.now, name))
	}
	at(0) // planned 1 s in: the wait begins
	h.now = start.Add(30 * time.Second)
	unservable("q") // another pod: a plan 31 s in
	h.settle()
	h.now = start.Add(35 * time.Second)
	phase(v1alpha1.PhaseRepartitioning) // 34 s counted
	h.settle()
	h.now = start.Add(100 * time.Second)
	unservable("r") // a plan while the GPU is not Ready: no decline
	h.settle()
	if got := h.specOf("n2")[0]; got != "" && got != "7g.80gb@0" {
		t.Fatalf("n2 changed to %q while n1's GPU was not Ready", got)
	}
	h.now = start.Add(110 * time.Second)
	phase(v1alpha1.PhaseReady)
	requeue := h.settle()
	// 34 s counted before the change, 26 s more from 110 s in.
	if ends, want := h.now.Add(requeue).Sub(start), 136*time.Second; ends < want-time.Second || ends > want+time.Second {
		t.Errorf("the wait falls due %s after it began, want %s (34 s counted before the GPU's change, the rest from its end)", ends, want)
	}
	h.now = h.now.Add(requeue)
	h.settle()
	if got := h.specOf("n2")[0]; got != "1g.10gb@6" {
		t.Errorf("n2's desired layout %q, want 1g.10gb@6 for the pod declined on n1", got)
	}
	// The pod leaves the demand a while (a scheduling error) and comes
	// back: n1 stays declined for it.
	for _, reason := range []string{corev1.PodReasonSchedulerError, corev1.PodReasonUnschedulable} {
		p := h.pod("p")
		p.Status.Conditions[0].Reason = reason
		if err := h.c.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(time.Second)
		h.settle()
	}
	if _, ok := h.a.declines.declined["uid-p"]["n1"]; !ok {
		t.Errorf("n1 no longer declined for pod p once it is pending again: %v", h.a.declines.declined)
	}
}

// TestDeclineLength: a node declined again for a pod stays declined twice
// as long each time, up to eight times the first, without overflowing.
func TestDeclineLength(t *testing.T) {
	for times, want := range []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 80 * time.Minute, 80 * time.Minute, 80 * time.Minute} {
		if got := declineLength(10*time.Minute, times); got != want {
			t.Errorf("declined %d time(s) before: %s, want %s", times, got, want)
		}
	}
	if got := declineLength(math.MaxInt64/4, 3); got != math.MaxInt64 {
		t.Errorf("a huge --auto-declined-for doubled: %d, want math.MaxInt64", got)
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

// TestSchedulerSteady: kube-scheduler counts as steady once the
// controller, on its own clock, has seen its Lease renewed (changed between
// two readings at most a lease duration apart) within the lease duration,
// and held by one scheduler for UnboundAfter; the Lease's own times, written
// with the scheduler's clock, are not read. A Lease not renewed for a lease
// duration makes the scheduler that takes it up again start over.
func TestSchedulerSteady(t *testing.T) {
	type reading struct {
		at     time.Duration
		rv     string
		holder string
	}
	renewing := func(holder string, from, to time.Duration, rv int) []reading {
		var out []reading
		for at := from; at <= to; at += 5 * time.Second {
			rv++
			out = append(out, reading{at, fmt.Sprint(rv), holder})
		}
		return out
	}
	// stalled: readings every 5 s of a Lease not renewed.
	stalled := func(holder string, from, to time.Duration, rv int) []reading {
		var out []reading
		for at := from; at <= to; at += 5 * time.Second {
			out = append(out, reading{at, fmt.Sprint(rv), holder})
		}
		return out
	}
	for name, tc := range map[string]struct {
		readings []reading
		want     bool
		why      string
	}{
		"first reading":             {readings: []reading{{0, "1", "s1"}}, why: "has not been seen renewing its Lease within 15s"},
		"renewed, held 5 s":         {readings: renewing("s1", 0, 5*time.Second, 0), why: "has been seen holding its Lease for 5s, less than 1m0s"},
		"renewed, held a minute":    {readings: renewing("s1", 0, time.Minute, 0), want: true},
		"released":                  {readings: append(renewing("s1", 0, time.Minute, 0), reading{65 * time.Second, "99", ""}), why: "no kube-scheduler holds its Lease"},
		"not renewed for 20 s":      {readings: append(renewing("s1", 0, time.Minute, 0), stalled("s1", 65*time.Second, 80*time.Second, 13)...), why: "has not been seen renewing its Lease within 15s"},
		"a new holder":              {readings: append(renewing("s1", 0, time.Minute, 0), renewing("s2", 65*time.Second, 90*time.Second, 50)...), why: "kube-scheduler s2 has been seen holding its Lease for 25s"},
		"a new holder, a minute on": {readings: append(renewing("s1", 0, time.Minute, 0), renewing("s2", 65*time.Second, 125*time.Second, 50)...), want: true},
		// The same scheduler, hung for 20 s, renews again: it starts over.
		"resumed after a stall": {readings: append(append(renewing("s1", 0, time.Minute, 0), stalled("s1", 65*time.Second, 80*time.Second, 13)...), renewing("s1", 85*time.Second, 120*time.Second, 50)...),
			why: "has been seen holding its Lease for 35s"},
		// Readings far apart tell nothing of what happened in between
		// (the same scheduler may have hung and resumed): they start over.
		"read again after 2 minutes": {readings: append(renewing("s1", 0, time.Minute, 0), reading{3 * time.Minute, "77", "s1"}), why: "has not been seen renewing"},
		"and 5 s later":              {readings: append(renewing("s1", 0, time.Minute, 0), renewing("s1", 3*time.Minute, 185*time.Second, 76)...), why: "has been seen holding its Lease for 5s"},
		"and a minute later":         {readings: append(renewing("s1", 0, time.Minute, 0), renewing("s1", 3*time.Minute, 4*time.Minute, 76)...), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			// The Lease's times, in the scheduler's clock, an hour off.
			stale := &metav1.MicroTime{Time: start.Add(-time.Hour)}
			var w schedulerWatch
			var got bool
			var why string
			for _, r := range tc.readings {
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: r.rv},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.holder), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: stale, RenewTime: stale}}
				got, why = w.observe(l, start.Add(r.at), time.Minute)
			}
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("steady %t %q, want %t %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// TestDeclinesHeldWhileSchedulerIsDown: a pod's free device has waited its
// minute while kube-scheduler's Lease is not renewed: no node is declined
// (every pod would look declined while nothing binds). Once a scheduler
// has held the Lease for a minute, the planner, looking again every few
// seconds, declines it.
func TestDeclinesHeldWhileSchedulerIsDown(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	stale := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1"), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: stale}, RenewTime: &metav1.MicroTime{Time: stale}}}
	h := newAutoCluster(t, ml, l,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
	h.a.SchedulerLease = DefaultSchedulerLease
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
	start := h.now
	h.settle()
	h.now = start.Add(2 * time.Minute)
	requeue := h.settle()
	if got := h.specOf("n2")[0]; got != "" && got != "7g.80gb@0" {
		t.Fatalf("n2 changed to %q while kube-scheduler's Lease was not renewed", got)
	}
	if requeue <= 0 || requeue > schedulerHoldRecheck {
		t.Errorf("while declines are held, asked to look again in %s, want within %s", requeue, schedulerHoldRecheck)
	}
	// A new scheduler takes the Lease: still held for a minute.
	l.Spec.HolderIdentity = ptr.To("s2")
	l.Spec.AcquireTime = &metav1.MicroTime{Time: h.now}
	l.Spec.RenewTime = &metav1.MicroTime{Time: h.now}
	if err := h.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.now = h.now.Add(requeue)
		h.renew(l)
		requeue = h.settle()
	}
	if got := h.specOf("n2")[0]; got != "" && got != "7g.80gb@0" {
		t.Fatalf("n2 changed to %q less than a minute after a scheduler took the Lease", got)
	}
	for range 10 {
		h.now = h.now.Add(requeue)
		h.renew(l)
		requeue = h.settle()
		if h.specOf("n2")[0] == "1g.10gb@6" {
			break
		}
	}
	if got := h.specOf("n2")[0]; got != "1g.10gb@6" {
		t.Errorf("n2's desired layout %q once kube-scheduler has run for a minute, want 1g.10gb@6 for the pod declined on n1", got)
	}
	if since := h.now.Sub(l.Spec.AcquireTime.Time); since < time.Minute || since > time.Minute+schedulerHoldRecheck+2*time.Second {
		t.Errorf("declined %s after the scheduler took its Lease, want a minute and at most one recheck more", since)
	}
}

// TestDeclinesAndSchedulerLeaseReads: where kube-scheduler's Lease does not
// exist (no leader election) or may not be read, declines are not held
// back; where reading it fails otherwise, they are, until it can be read.
func TestDeclinesAndSchedulerLeaseReads(t *testing.T) {
	for name, tc := range map[string]struct {
		err      error
		declined bool
	}{
		"no Lease":        {err: apierrors.NewNotFound(coordinationv1.Resource("leases"), "kube-scheduler"), declined: true},
		"forbidden":       {err: apierrors.NewForbidden(coordinationv1.Resource("leases"), "kube-scheduler", errors.New("no grant")), declined: true},
		"API unavailable": {err: apierrors.NewServiceUnavailable("etcd is down")},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
			h := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
				node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
			h.a.SchedulerLease = DefaultSchedulerLease
			schedulerSteadyMetric.Set(-1) // not set by this case yet
			h.a.APIReader = migLayoutsFrom{live: h.c, Reader: interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.err
				},
			})}
			h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
			requeue := h.settle()
			for range 3 {
				h.now = h.now.Add(requeue)
				requeue = h.settle()
			}
			if got := h.specOf("n2")[0] == "1g.10gb@6"; got != tc.declined {
				t.Errorf("n1 declined for the pod: %t, want %t (n2's desired layout %q)", got, tc.declined, h.specOf("n2")[0])
			}
			if got, want := testutil.ToFloat64(schedulerSteadyMetric), map[bool]float64{true: 1}[tc.declined]; got != want {
				t.Errorf("miglayout_controller_scheduler_steady %v, want %v", got, want)
			}
			if !tc.declined && (requeue <= 0 || requeue > schedulerHoldRecheck) {
				t.Errorf("while the Lease cannot be read, asked to look again in %s, want within %s", requeue, schedulerHoldRecheck)
			}
		})
	}
}

// TestDeclineWaitSkipsNomination: while a preemption nominates the pod to
// the node of its free device, the wait does not count; once the
// nomination ends, it counts from there, so the node is not declined at
// once for the time kube-scheduler was working on the preemption.
func TestDeclineWaitSkipsNomination(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
	p := autoPod("p", h.now, "c1")
	p.Status.NominatedNodeName = "n1"
	h.create(autoClaim("c1", profileSelector("1g.10gb")), p)
	h.settle()
	h.now = h.now.Add(2 * time.Minute)
	h.settle()
	cleared := h.now
	p = h.pod("p")
	p.Status.NominatedNodeName = ""
	if err := h.c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	requeue := h.settle()
	if got := h.specOf("n2")[0]; got != "" && got != "7g.80gb@0" {
		t.Fatalf("n2 changed to %q as the nomination ended: the nominated time counted", got)
	}
	h.now = h.now.Add(requeue)
	h.settle()
	if got := h.specOf("n2")[0]; got != "1g.10gb@6" {
		t.Errorf("n2's desired layout %q %s after the nomination ended, want 1g.10gb@6 for the pod declined on n1", got, h.now.Sub(cleared))
	}
}

// TestSchedulerLeaseFollowedAhead: the controller follows kube-scheduler's
// Lease while Auto mode has nodes, not only once a wait falls due. A pod
// that arrives after the scheduler has been seen renewing its Lease for a
// minute has its node declined when its wait falls due, not a minute
// later; with no Auto node the Lease is not read.
func TestSchedulerLeaseFollowedAhead(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1"), LeaseDurationSeconds: ptr.To[int32](15)}}
	h := newAutoCluster(t, ml, l,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
	h.a.SchedulerLease = DefaultSchedulerLease
	var reads atomic.Int64
	h.a.APIReader = countingReader{Reader: h.c, gets: &reads}
	ctx := context.Background()
	// follow renews the Lease, as kube-scheduler does, and runs the
	// follower every schedulerHoldRecheck for d.
	follow := func(d time.Duration) {
		t.Helper()
		for end := h.now.Add(d); h.now.Before(end); {
			h.now = h.now.Add(schedulerHoldRecheck)
			h.renew(l)
			h.a.followSchedulerLease(ctx)
		}
	}
	follow(time.Minute)
	if n := reads.Load(); n != 0 {
		t.Fatalf("kube-scheduler's Lease read %d times before any Auto node was planned, want none", n)
	}
	h.settle()
	follow(time.Minute)
	if reads.Load() == 0 {
		t.Fatal("kube-scheduler's Lease not read while Auto mode has nodes")
	}
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
	h.settle()
	start := h.now
	for h.now.Sub(start) <= DefaultUnboundAfter+schedulerHoldRecheck && h.specOf("n2")[0] != "1g.10gb@6" {
		follow(schedulerHoldRecheck)
		h.settle()
	}
	if got := h.specOf("n2")[0]; got != "1g.10gb@6" {
		t.Fatalf("n2's desired layout %q %s after the pod was planned on n1's free device, want 1g.10gb@6 for the pod declined on n1", got, h.now.Sub(start))
	}
	if since := h.now.Sub(start); since < DefaultUnboundAfter {
		t.Errorf("declined %s after the pod was planned, want at least %s", since, DefaultUnboundAfter)
	}
}

// countingReader counts its Gets.
type countingReader struct {
	client.Reader
	gets *atomic.Int64
}

func (r countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// renew writes the Lease renewed now, as kube-scheduler does.
func (h *autoCluster) renew(l *coordinationv1.Lease) {
	h.t.Helper()
	l.Spec.RenewTime = &metav1.MicroTime{Time: h.now}
	if err := h.c.Update(context.Background(), l); err != nil {
		h.t.Fatal(err)
	}
}

// TestSchedulerLeaseFollowerRuns: the follower, run as the manager runs
// it, reads kube-scheduler's Lease over and over while passes run beside
// it (go test -race checks they share nothing unguarded), reads a Lease
// that does not exist once a minute at most, and ends with its context.
func TestSchedulerLeaseFollowerRuns(t *testing.T) {
	for name, tc := range map[string]struct {
		lease    bool
		tick     time.Duration // how far the clock moves each time it is read
		maxReads int64
	}{
		"a Lease":  {lease: true, tick: time.Second},
		"no Lease": {tick: time.Millisecond, maxReads: 1},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
			objs := []client.Object{node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6"))}
			if tc.lease {
				objs = append(objs, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1"), LeaseDurationSeconds: ptr.To[int32](15)}})
			}
			h := newAutoCluster(t, ml, objs...)
			h.a.SchedulerLease = DefaultSchedulerLease
			var reads atomic.Int64
			h.a.APIReader = countingReader{Reader: h.c, gets: &reads}
			h.settle()
			var ticks atomic.Int64
			base := h.now
			h.a.Now = func() time.Time { return base.Add(time.Duration(ticks.Add(1)) * tc.tick) }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.a.schedulerLeaseFollower(time.Millisecond).Start(ctx) }()
			for range 20 {
				if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			deadline := time.Now().Add(10 * time.Second)
			for tc.maxReads == 0 && reads.Load() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the follower ended with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the follower did not end with its context")
			}
			n := reads.Load()
			if tc.maxReads == 0 && n < 3 {
				t.Errorf("the Lease read %d times, want it read every interval", n)
			}
			if tc.maxReads > 0 && n > tc.maxReads {
				t.Errorf("a Lease that does not exist read %d times within a minute, want at most %d", n, tc.maxReads)
			}
		})
	}
}

// TestSchedulerLeaseReadEvery: the Lease is read every third of its lease
// duration, between 1 s and 5 s, so that a kube-scheduler run with a short
// lease duration is still seen renewing it and found steady; a Lease not
// checked is looked for once a minute.
func TestSchedulerLeaseReadEvery(t *testing.T) {
	for name, tc := range map[string]struct {
		duration   int32 // LeaseDurationSeconds; 0: not set
		unreadable bool
		want       time.Duration
	}{
		"kube-scheduler's default": {duration: 15, want: 5 * time.Second},
		"not set":                  {want: 5 * time.Second},
		"a long one":               {duration: 60, want: 5 * time.Second},
		"a short one":              {duration: 6, want: 2 * time.Second},
		"a very short one":         {duration: 2, want: time.Second},
		"not checked":              {unreadable: true, want: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			var w schedulerWatch
			start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1")}}
			if tc.duration > 0 {
				l.Spec.LeaseDurationSeconds = ptr.To(tc.duration)
			}
			steady := false
			for i, now := 0, start; now.Sub(start) <= time.Minute+5*time.Second; i, now = i+1, now.Add(w.readEvery()) {
				l.ResourceVersion = fmt.Sprint(i)
				steady, _ = w.observe(l, now, time.Minute)
			}
			if tc.unreadable {
				w = schedulerWatch{unreadable: true}
			} else if !steady {
				t.Errorf("a scheduler renewing a Lease of %d s, read every %s for a minute, not found steady", tc.duration, w.readEvery())
			}
			if got := w.readEvery(); got != tc.want {
				t.Errorf("read every %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDeclinedNodes: the nodes left out of a pod's plans are read back
// from the controller's own events, each for the length its note gives
// from the event's last time.
func TestDeclinedNodes(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	declined := func(uid, node string, keptFor time.Duration, last time.Time) eventsv1.Event {
		return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: uid, UID: types.UID(uid)},
			ReportingController: Name, Reason: EventSchedulerDeclinedNode, EventTime: metav1.NewMicroTime(last),
			Note: truncate(declinedNote(declination{node: node, devices: []string{"gpu-0-mig-1g10gb-19-6"}, waited: time.Minute, keptFor: keptFor}), 60)}
	}
	inSeries := declined("p1", "n3", 10*time.Minute, at.Add(-time.Hour))
	inSeries.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at.Add(-5 * time.Minute))}
	otherReason := declined("p1", "n4", time.Hour, at)
	otherReason.Reason = EventWaitingForRepartition
	notPod := declined("p1", "n5", time.Hour, at)
	notPod.Regarding.Kind = "Node"
	garbled := declined("p1", "n6", time.Hour, at)
	garbled.Note = "node n6 is left out of the pod's plans for ever: ..."
	oldStyle := declined("p1", "n7", time.Hour, at)
	oldStyle.EventTime, oldStyle.DeprecatedLastTimestamp = metav1.MicroTime{}, metav1.NewTime(at.Add(-30*time.Minute))
	otherReporter := declined("p1", "n8", time.Hour, at)
	otherReporter.ReportingController = "someone-else"
	otherNamespace := declined("p1", "n9", time.Hour, at)
	otherNamespace.Namespace = "elsewhere"
	for name, tc := range map[string]struct {
		events []eventsv1.Event
		want   map[types.UID][]string
	}{
		"none": {want: map[types.UID][]string{}},
		"within its length": {events: []eventsv1.Event{declined("p1", "n1", 20*time.Minute, at.Add(-10*time.Minute))},
			want: map[types.UID][]string{"p1": {"n1"}}},
		"past its length": {events: []eventsv1.Event{declined("p1", "n1", 20*time.Minute, at.Add(-20*time.Minute))},
			want: map[types.UID][]string{}},
		"a doubled length": {events: []eventsv1.Event{declined("p1", "n1", 40*time.Minute, at.Add(-30*time.Minute))},
			want: map[types.UID][]string{"p1": {"n1"}}},
		"two nodes of a pod, and another pod's": {events: []eventsv1.Event{
			declined("p1", "n2", time.Hour, at), declined("p1", "n1", time.Hour, at), declined("p1", "n1", time.Hour, at), declined("p2", "n1", time.Hour, at)},
			want: map[types.UID][]string{"p1": {"n1", "n2"}, "p2": {"n1"}}},
		"a length beyond 8 times --auto-declined-for, ended": {events: []eventsv1.Event{declined("p1", "n1", 100000*time.Hour, at.Add(-81*time.Minute))},
			want: map[types.UID][]string{}},
		"a length beyond 8 times --auto-declined-for": {events: []eventsv1.Event{declined("p1", "n1", 100000*time.Hour, at.Add(-79*time.Minute))},
			want: map[types.UID][]string{"p1": {"n1"}}},
		"a series' last observation":                               {events: []eventsv1.Event{inSeries}, want: map[types.UID][]string{"p1": {"n3"}}},
		"a last timestamp":                                         {events: []eventsv1.Event{oldStyle}, want: map[types.UID][]string{"p1": {"n7"}}},
		"other events and garbled notes":                           {events: []eventsv1.Event{otherReason, notPod, garbled}, want: map[types.UID][]string{}},
		"another reporter's, or in another namespace than its pod": {events: []eventsv1.Event{otherReporter, otherNamespace}, want: map[types.UID][]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DeclinedNodes(tc.events, at, 10*time.Minute)); diff != "" {
				t.Errorf("DeclinedNodes (-want +got):\n%s", diff)
			}
		})
	}
	// A time set in the future counts as the time read: the length,
	// bounded to 8 times --auto-declined-for, runs from there.
	ahead := []eventsv1.Event{declined("p1", "n1", 100000*time.Hour, at.AddDate(100, 0, 0))}
	var tr declineTracker
	restored := tr.restore(declinedEvents(ahead, at), 10*time.Minute)
	if len(restored) != 1 || !restored[0].until.Equal(at.Add(80*time.Minute)) {
		t.Errorf("an event dated a century ahead, read at %v, restored as %+v, want one decline until 80 minutes later", at, restored)
	}
}

// TestDeclinesRestoredDoubleAgain pins how many times a node read back
// from an event counts as declined: declined again for the same pod after
// a restart, it is left out twice as long as the longest event read says
// it was, up to 8 times --auto-declined-for.
func TestDeclinesRestoredDoubleAgain(t *testing.T) {
	const keepFor = 10 * time.Minute
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		lengths []time.Duration
		want    time.Duration
	}{
		"the first length":                      {lengths: []time.Duration{10 * time.Minute}, want: 20 * time.Minute},
		"once doubled":                          {lengths: []time.Duration{20 * time.Minute}, want: 40 * time.Minute},
		"twice doubled":                         {lengths: []time.Duration{40 * time.Minute}, want: 80 * time.Minute},
		"the longest":                           {lengths: []time.Duration{80 * time.Minute}, want: 80 * time.Minute},
		"beyond the longest":                    {lengths: []time.Duration{100000 * time.Hour}, want: 80 * time.Minute},
		"between two lengths (keepFor was 15m)": {lengths: []time.Duration{15 * time.Minute}, want: 40 * time.Minute},
		"shorter than keepFor":                  {lengths: []time.Duration{5 * time.Minute}, want: 20 * time.Minute},
		"the longest of two events":             {lengths: []time.Duration{40 * time.Minute, 10 * time.Minute}, want: 80 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			var events []declinedEvent
			for _, l := range tc.lengths {
				events = append(events, declinedEvent{uid: "p1", node: "n1", until: at.Add(l), length: l})
			}
			var tr declineTracker
			tr.restore(events, keepFor)
			r := tr.declined["p1"]["n1"]
			if r == nil {
				t.Fatalf("restore(%v) kept no record of node n1 for pod p1", tc.lengths)
			}
			if got := declineLength(keepFor, r.times); got != tc.want {
				t.Errorf("after reading back declines of %v, the next decline lasts %v, want %v", tc.lengths, got, tc.want)
			}
		})
	}
}
