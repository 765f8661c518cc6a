package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
