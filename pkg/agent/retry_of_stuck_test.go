package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestRetryOfFailedGPUToldOnce: a GPU whose change NVML refuses pass after
// pass is told Draining and NVMLError once, with its first attempt, not at
// each retry; a new spec's drain is told again.
func TestRetryOfFailedGPUToldOnce(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(50)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	reasons := func() []string { return eventReasons(rec) }
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for pass, want := range [][]string{{EventDraining, EventNVMLError}, nil, nil} {
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(res.RequeueAfter + time.Second) // each pass comes at its retry
		if diff := cmp.Diff(want, reasons()); diff != "" {
			t.Errorf("pass %d: events (-want +got):\n%s", pass, diff)
		}
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if g0 := cur.Status.GPUs[0]; g0.Phase != v1alpha1.PhaseFailed || g0.Reason != v1alpha1.ReasonNVMLError {
		t.Fatalf("GPU 0 after the failures: %s %s, want Failed NVMLError", g0.Phase, g0.Reason)
	}
	// A new spec: its drain is told.
	cur.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "4g.40gb@0")}
	cur.Generation = 2
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := reasons(); len(got) == 0 || got[0] != EventDraining {
		t.Errorf("a new spec's pass: events %q, want Draining first", got)
	}
}

// TestRetryOfHalfMadeGPUStaysBlocked: a GPU whose change stopped part way
// (one device destroyed, NVML refusing the other: another client holds
// it) is Blocked; its retries, also after an edit of the spec that keeps
// the GPU's layout (a new reason), and those of an agent restarted since,
// show no Draining, in status or in an event: the controller would take a Draining GPU for one nothing was
// destroyed on, and a conflict, a pause or an Auto plan could then drop
// the change and leave the GPU half made. Once the client lets go, a
// retry whose pass fails says why, and the next repartitions the GPU.
func TestRetryOfHalfMadeGPUStaysBlocked(t *testing.T) {
	h := newHalfMade(t, spec(0, "7g.80gb@0"))
	h.retries(t, "retries")
	h.newReason(t, `rule "whole", edited`)
	h.retries(t, "retries after a new reason")
	// A restarted agent (nothing remembered) reads the layout the GPU was
	// left Blocked on from its journal.
	h.restart()
	h.newReason(t, `rule "whole", edited again`)
	h.retries(t, "a restarted agent's retries after a new reason")
	// The client lets go, and the retry's drain publication is refused:
	// the row says why the pass failed, not the Blocked reason it retried.
	if err := h.g.sim.CloseClient(h.holder); err != nil {
		t.Fatal(err)
	}
	h.g.inv.failDrain = errors.New("admission webhook denied the request")
	h.pass(t)
	var cur v1alpha1.NodeMigLayout
	if err := h.c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if row := cur.Status.GPUs[0]; row.Reason != ReasonPassFailed || !strings.Contains(row.Message, "admission webhook denied") {
		t.Errorf("after a failed retry: row %s %s %q, want PassFailed saying why", row.Phase, row.Reason, row.Message)
	}
	h.g.inv.failDrain = nil
	h.pass(t)
	if left := h.g.layouts(t); !cmp.Equal(left, []string{"7g.80gb@0"}) {
		t.Errorf("layouts %v once the client let go, want the change carried out", left)
	}
}

// halfMade is GPU 0 of an A100 whose change from 3g.40gb@0,3g.40gb@4 to
// target stopped part way: another client holds the 3g.40gb@4, so the
// first pass destroyed only the 3g.40gb@0 and left the GPU Blocked.
type halfMade struct {
	g      *rig
	c      client.WithWatch
	phases *[]v1alpha1.GPUPhase // written by the last pass
	rec    *events.FakeRecorder
	holder uint64 // the client holding 3g.40gb@4
	clock  time.Time
	r      *NodeReconciler
}

// newHalfMade runs the first pass and checks that it stopped part way.
func newHalfMade(t *testing.T, target v1alpha1.GPUSpec) *halfMade {
	t.Helper()
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	holder, err := g.sim.OpenClient(g.migUUID(t, 0, "3g.40gb@4"))
	if err != nil {
		t.Fatal(err)
	}
	c, phases := phaseRecordingClient(t, target)
	h := &halfMade{g: g, c: c, phases: phases, rec: events.NewFakeRecorder(50), holder: holder,
		clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h.restart()
	h.pass(t)
	if left := g.layouts(t); !cmp.Equal(left, []string{"3g.40gb@4"}) {
		t.Fatalf("premise: layouts %v after the first pass, want the change stopped part way", left)
	}
	return h
}

// restart replaces the agent's reconciler: nothing it remembered is left.
func (h *halfMade) restart() {
	h.r = &NodeReconciler{Client: h.c, NodeName: "n1", Repartitioner: h.g.r, Recorder: h.rec, Now: func() time.Time { return h.clock }}
}

// pass runs a pass when its retry is due and returns the events it
// recorded.
func (h *halfMade) pass(t *testing.T) []string {
	t.Helper()
	*h.phases = nil
	res, err := h.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}})
	if err != nil && h.g.inv.failDrain == nil {
		t.Fatal(err)
	}
	h.clock = h.clock.Add(res.RequeueAfter + time.Second)
	return eventReasons(h.rec)
}

// retries runs two retries, which must show no Draining in status or an
// event.
func (h *halfMade) retries(t *testing.T, step string) {
	t.Helper()
	for range 2 {
		if events := h.pass(t); slices.Contains(*h.phases, v1alpha1.PhaseDraining) || slices.Contains(events, EventDraining) {
			t.Errorf("%s: phases written %v, events %v, want no Draining", step, *h.phases, events)
		}
	}
}

// newReason edits GPU 0's reason: a new generation of the same layout.
func (h *halfMade) newReason(t *testing.T, reason string) {
	t.Helper()
	var cur v1alpha1.NodeMigLayout
	if err := h.c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.GPUs[0].Reason = reason
	cur.Generation++
	if err := h.c.Update(t.Context(), &cur); err != nil {
		t.Fatal(err)
	}
}

// TestRestartedAgentShowsNewSpecDrain: a GPU left Failed on one layout,
// then a restarted agent (nothing remembered) given another: the new
// change's drain is shown, in status and in an event (the pass records its
// journal entry before it drains: the entry read is the one the last pass
// left).
func TestRestartedAgentShowsNewSpecDrain(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	c, phases := phaseRecordingClient(t, spec(0, "7g.80gb@0"))
	rec := events.NewFakeRecorder(50)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	first := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	if _, err := first.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if row := cur.Status.GPUs[0]; row.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("premise: GPU 0 %s %s, want Failed", row.Phase, row.Reason)
	}
	cur.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "4g.40gb@0")}
	cur.Generation++
	if err := c.Update(t.Context(), &cur); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	*phases = nil
	restarted := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	if _, err := restarted.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	told := eventReasons(rec)
	if !slices.Contains(*phases, v1alpha1.PhaseDraining) || !slices.Contains(told, EventDraining) {
		t.Errorf("the new spec's pass: phases written %v, events %v, want its drain shown", *phases, told)
	}
}
