package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestWaitingPodHearsAgainAfterEventRepeat: a pod still waiting for the
// same reason hears it again once eventRepeat has passed since it last
// heard it, not before.
func TestWaitingPodHearsAgainAfterEventRepeat(t *testing.T) {
	for name, tc := range map[string]struct {
		after      time.Duration
		wantEvents int
	}{
		"a second before": {after: eventRepeat - time.Second, wantEvents: 1},
		"at eventRepeat":  {after: eventRepeat, wantEvents: 2},
	} {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return now }}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
			snap := planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}
			res := planner.Result{Unservable: map[string]string{"ns/p": planner.NoRoom}}
			a.notify(AutoInputs{}, snap, res)
			now = now.Add(tc.after)
			a.notify(AutoInputs{}, snap, res)
			if got := len(rec.Events); got != tc.wantEvents {
				t.Errorf("%d events after %v, want %d", got, tc.after, tc.wantEvents)
			}
		})
	}
}
