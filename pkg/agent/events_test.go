package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEventsOfSeveralGPUsAreAllRecorded: with client-go's events.k8s.io
// recorder (the one the agent's manager hands out), events of one reason
// about two GPUs of the node must both reach the API server with their
// notes, not the second folded into the first as a repeat.
func TestEventsOfSeveralGPUsAreAllRecorded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()
	scheme := testScheme(t)
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &NodeReconciler{Recorder: b.NewRecorder(scheme, "miglayout-agent")}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 0, "in use: gpu-0-mig-1g10gb-19-0")
	r.gpuEvent(nml, "Warning", EventBlocked, "Repartition", 1, "in use: gpu-1-mig-1g10gb-19-0")
	want := []string{"GPU 0: in use: gpu-0-mig-1g10gb-19-0", "GPU 1: in use: gpu-1-mig-1g10gb-19-0"}
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = nil
		for _, e := range list.Items {
			got = append(got, e.Note)
		}
		slices.Sort(got)
		return len(got) >= len(want), nil
	})
	if err != nil {
		t.Errorf("waiting for both events: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}
