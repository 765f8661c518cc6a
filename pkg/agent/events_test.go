package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/test/eventstest"
)

// TestEventsOfSeveralGPUsAreAllRecorded: with client-go's events.k8s.io
// recorder (the one the agent's manager hands out), events of one reason
// about two GPUs of the node must both reach the API server with their
// notes, not the second folded into the first as a repeat.
func TestEventsOfSeveralGPUsAreAllRecorded(t *testing.T) {
	r, nml, notes := recordingReconciler(t)
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 0, "in use: gpu-0-mig-1g10gb-19-0")
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 1, "in use: gpu-1-mig-1g10gb-19-0")
	want := []string{"GPU 0: in use: gpu-0-mig-1g10gb-19-0", "GPU 1: in use: gpu-1-mig-1g10gb-19-0"}
	if diff := cmp.Diff(want, notes(len(want))); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}

// TestEventsOfOneGPUWithNewNotesAreAllRecorded: events of one reason about
// the same GPU whose notes differ (blocked by one device, then by another;
// repartitioned to one layout, then, minutes later, to another) all reach
// the API server with their notes.
func TestEventsOfOneGPUWithNewNotesAreAllRecorded(t *testing.T) {
	r, nml, notes := recordingReconciler(t)
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 0, "in use: gpu-0-mig-1g10gb-19-0")
	notes(1) // at the API server before the next
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 0, "in use: gpu-0-mig-1g10gb-19-1")
	want := []string{"GPU 0: in use: gpu-0-mig-1g10gb-19-0", "GPU 0: in use: gpu-0-mig-1g10gb-19-1"}
	if diff := cmp.Diff(want, notes(len(want))); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}

// recordingReconciler is a NodeReconciler with client-go's events.k8s.io
// recorder (the one the agent's manager hands out), a NodeMigLayout to
// record on, and notes, which waits for n events at the API server.
func recordingReconciler(t *testing.T) (*NodeReconciler, *v1alpha1.NodeMigLayout, func(n int) []string) {
	t.Helper()
	scheme := testScheme(t)
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rec, notes := eventstest.Recorder(t, scheme, "miglayout-agent")
	return &NodeReconciler{Recorder: eventnote.Distinct(rec)}, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}, notes
}
