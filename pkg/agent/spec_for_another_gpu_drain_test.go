package agent

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEntryWrittenAgainForItsGPUShowsItsDrain: GPU 0's entry was written
// for another GPU (Blocked, SpecForAnotherGPU); the controller writes it
// again for GPU 0, with the same layout. That pass is GPU 0's first try at
// the layout, not a retry of a stuck one: its drain is shown.
func TestEntryWrittenAgainForItsGPUShowsItsDrain(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	ctx := context.Background()
	gpus, err := g.mgr.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entry := spec(0, "7g.80gb@0")
	entry.UUID = "GPU-another"
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{entry}}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(50)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if g0 := cur.Status.GPUs[0]; g0.Phase != v1alpha1.PhaseBlocked || g0.Reason != v1alpha1.ReasonSpecForAnotherGPU {
		t.Fatalf("GPU 0 under another GPU's entry: %s %s, want Blocked %s", g0.Phase, g0.Reason, v1alpha1.ReasonSpecForAnotherGPU)
	}
	eventReasons(rec)
	cur.Spec.GPUs[0].UUID = gpus[0].UUID
	cur.Generation = 2
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := eventReasons(rec); len(got) == 0 || got[0] != EventDraining {
		t.Errorf("the entry's first pass for GPU 0: events %q, want Draining first", got)
	}
}
