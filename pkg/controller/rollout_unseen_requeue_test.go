package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
)

// A slot held for a write the cache does not show ends rolloutExpectTTL
// after the write on the Reconciler's clock, and the pass that holds a
// node for it asks to look again one second after that: here 20 s after
// the write, 41 s on.
func TestHeldSlotLooksAgainWhenTheUnseenWriteIsForgotten(t *testing.T) {
	c, n2 := staleRolloutCluster(t)
	now := h0()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	halveN2ThenReportN1(t, c, r, n2)
	now = now.Add(20 * time.Second)
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := rolloutExpectTTL - 20*time.Second + time.Second; res.RequeueAfter != want {
		t.Errorf("requeue after %v, want %v (the held slot's end on the Reconciler's clock, plus 1s)", res.RequeueAfter, want)
	}
}
