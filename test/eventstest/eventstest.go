// Package eventstest records events with client-go's events.k8s.io
// recorder, the one controller-runtime's manager hands out (with its
// folding of repeated events into Event.series), into a fake clientset, for
// tests that must see which events reach the API server and with which
// notes.
package eventstest

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
)

// Recorder returns a recorder for component whose events go to a fake
// clientset, and a function that waits (up to 10 s) until at least n
// events are stored and returns their notes, sorted; it fails the test
// when fewer arrive. The broadcaster stops when the test ends.
func Recorder(t *testing.T, scheme *runtime.Scheme, component string) (events.EventRecorder, func(n int) []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cs := fake.NewClientset()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	t.Cleanup(func() { b.Shutdown(); cancel() })
	notes := func(n int) []string {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			got = got[:0]
			for _, e := range list.Items {
				got = append(got, e.Note)
			}
			return len(got) >= n, nil
		})
		if err != nil {
			t.Errorf("waiting for %d events: %v (have %q)", n, err, got)
		}
		slices.Sort(got)
		return got
	}
	return b.NewRecorder(scheme, component), notes
}
