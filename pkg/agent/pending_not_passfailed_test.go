package agent

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPendingGPUIsNoFailedPass: a GPU left Pending for its turn (its
// Repartitioning report failed, so no NVML work was done) records no
// PassFailed warning: the pass did not fail.
func TestPendingGPUIsNoFailedPass(t *testing.T) {
	g, c := rigWithAutoChange(t, repartitioningReportFails())
	g.r.Reread = LiveSpecs(c, "n1")
	rec := events.NewFakeRecorder(20)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var after v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &after); err != nil {
		t.Fatal(err)
	}
	if st := after.Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != v1alpha1.ReasonPending {
		t.Fatalf("premise: GPU 0 %s/%s, want Pending/Pending", st.Phase, st.Reason)
	}
	if told := eventReasons(rec); slices.Contains(told, EventPassFailed) {
		t.Errorf("events %q, want no %s", told, EventPassFailed)
	}
}
