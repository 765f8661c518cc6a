package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/pkg/planner"
	"github.com/miglayout/miglayout/test/eventstest"
)

// TestPodWaitingForAnotherReasonHearsIt: a pending pod whose reason to wait
// changes while its reason code stays the same (WaitingForCapacity: no room
// now, then only a node whose agent is lost could take it; or
// NotServableByAutoMode for one cause, then for another) reads the new note
// in its events at the API server. The events.k8s.io recorder folds an
// event of the same pod, reason, action and related object into the
// series of the first one and keeps the first note, so each of these
// notes must reach the API server as an event of its own, as a pod planned
// onto another GPU does (TestPodPlannedOntoAnotherGPUHearsIt).
func TestPodWaitingForAnotherReasonHearsIt(t *testing.T) {
	tests := map[string]struct {
		first, then string // Result.Unservable reasons of two plans a minute apart
		want        []string
	}{
		"no room now, then only a node whose agent is lost": {
			first: planner.NoRoom, then: planner.WaitsForLostNode,
			want: []string{
				"no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows; it takes the first room that frees up",
				planner.WaitsForLostNode,
			},
		},
		"no room now, then a pod asking for every device is in the way": {
			first: planner.NoRoom, then: planner.WaitsForAllModeNode,
			want: []string{
				"no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows; it takes the first room that frees up",
				planner.WaitsForAllModeNode,
			},
		},
		"not servable for one cause, then for another": {
			first: "no profile satisfies claim ns/c", then: planner.NoAutoNode,
			want: []string{"no profile satisfies claim ns/c", planner.NoAutoNode},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec, notes := eventstest.Recorder(t, testScheme(t), Name)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := &AutoPlanner{Recorder: eventnote.Distinct(rec), Now: func() time.Time { return now }}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
			snap := planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}
			a.notify(AutoInputs{}, snap, planner.Result{Unservable: map[string]string{"ns/p": tc.first}})
			notes(1) // the first event is at the API server before the next plan, a minute later
			now = now.Add(time.Minute)
			a.notify(AutoInputs{}, snap, planner.Result{Unservable: map[string]string{"ns/p": tc.then}})
			want := slices.Sorted(slices.Values(tc.want)) // notes sorts
			if diff := cmp.Diff(want, notes(len(want))); diff != "" {
				t.Errorf("event notes at the API server (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitingForRepartitionToldOncePerChange: p1 and p2 (a 3g.40gb each)
// are planned on n1/gpu-0 (3g.40gb@0,3g.40gb@4); while the change is in
// flight (draining, a pod the plan cannot serve arriving, repartitioning)
// each pass plans them again, and may give each the other's device: each
// hears WaitingForRepartition once, as its GPU and layout stay the same
// (the device its note gives as example differed, and was told anew).
func TestWaitingForRepartitionToldOncePerChange(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0").inUse("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"),
		autoClaim("c2", profileSelector("3g.40gb")), autoPod("p2", h0().Add(1), "c2"))
	h.settle()
	var got []string
	collect := func() {
		for _, e := range h.events() {
			if strings.Contains(e, EventWaitingForRepartition) {
				got = append(got, e)
			}
		}
	}
	collect()
	if len(got) != 2 {
		t.Fatalf("after the plan: %q, want a WaitingForRepartition event for each of p1 and p2", got)
	}
	for _, step := range []func(){
		func() {
			h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
				st[0].Phase = v1alpha1.PhaseDraining
				return st
			})
		},
		func() { h.create(autoClaim("c3", profileSelector("7g.80gb")), autoPod("p3", h0().Add(2), "c3")) },
		func() {
			h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
				st[0].Phase = v1alpha1.PhaseRepartitioning
				return st
			})
		},
	} {
		step()
		h.now = h.now.Add(3 * time.Second)
		h.settle()
		collect()
	}
	if len(got) != 2 {
		t.Errorf("WaitingForRepartition events %q, want one for each of p1 and p2", got)
	}
}
