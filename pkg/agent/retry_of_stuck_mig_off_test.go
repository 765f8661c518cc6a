package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRetryOfHalfMadeGPUToMIGOffStaysBlocked: a GPU whose change to MIG
// off stopped part way (another client holds a device) is Blocked; its
// retries after an edit of the spec that keeps MIG off (a new reason)
// show no Draining: the agent remembers the spec it left the GPU Blocked
// on (the journal, which names a layout, cannot tell MIG off apart); a
// restarted agent, which remembers nothing, takes the row for the outcome
// of the spec its status observed.
func TestRetryOfHalfMadeGPUToMIGOffStaysBlocked(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	if _, err := g.sim.OpenClient(g.migUUID(t, 0, "3g.40gb@4")); err != nil {
		t.Fatal(err)
	}
	c, phases := phaseRecordingClient(t, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false})
	rec := events.NewFakeRecorder(50)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	pass := func() []string {
		t.Helper()
		*phases = nil
		res, err := r.Reconcile(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(res.RequeueAfter + time.Second)
		return eventReasons(rec)
	}
	pass()
	if left := g.layouts(t); !cmp.Equal(left, []string{"3g.40gb@4"}) {
		t.Fatalf("premise: layouts %v after the first pass, want the change stopped part way", left)
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if row := cur.Status.GPUs[0]; row.Phase != v1alpha1.PhaseBlocked {
		t.Fatalf("premise: GPU 0 %s %s, want Blocked", row.Phase, row.Reason)
	}
	cur.Spec.GPUs[0].Reason = `rule "off", edited`
	cur.Generation++
	if err := c.Update(t.Context(), &cur); err != nil {
		t.Fatal(err)
	}
	retries := func(step string) {
		t.Helper()
		for range 2 {
			if events := pass(); slices.Contains(*phases, v1alpha1.PhaseDraining) || slices.Contains(events, EventDraining) {
				t.Errorf("%s: phases written %v, events %v, want no Draining", step, *phases, events)
			}
		}
	}
	retries("retries after a new reason")
	r = &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	retries("a restarted agent's retries")
}
