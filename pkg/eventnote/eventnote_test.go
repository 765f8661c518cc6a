package eventnote

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/test/eventstest"
)

// TestDistinctKeepsNewNotes: events of one object, reason and action reach
// the API server with each note that differs, while a repeat of a note is
// folded into its series as the recorder does without Distinct.
func TestDistinctKeepsNewNotes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	for name, tc := range map[string]struct {
		wrap func(r events.EventRecorder) events.EventRecorder
		want []string
	}{
		"distinct": {wrap: func(r events.EventRecorder) events.EventRecorder { return Distinct(Distinct(r)) },
			want: []string{"gpu 0 is blocked: DeviceInUse", "gpu 0 is blocked: ResetRequired"}},
		"plain recorder": {wrap: func(r events.EventRecorder) events.EventRecorder { return r },
			want: []string{"gpu 0 is blocked: DeviceInUse"}},
	} {
		t.Run(name, func(t *testing.T) {
			raw, notes := eventstest.Recorder(t, scheme, "test")
			rec := tc.wrap(raw)
			for _, cause := range []string{"DeviceInUse", "DeviceInUse", "ResetRequired"} {
				rec.Eventf(pod, nil, corev1.EventTypeWarning, "Blocked", "RepartitionGPU0", "gpu 0 is blocked: %s", cause)
				notes(1) // stored before the next is recorded
			}
			if diff := cmp.Diff(tc.want, notes(len(tc.want))); diff != "" {
				t.Errorf("notes at the API server (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAction(t *testing.T) {
	a, b := Action("Plan", "note one"), Action("Plan", "note two")
	if a == b || a != Action("Plan", "note one") {
		t.Errorf("Action(Plan, ...) = %q and %q: want equal for equal notes only", a, b)
	}
	if len(a) != len("Plan")+9 || a[:5] != "Plan-" {
		t.Errorf("Action = %q: want Plan-<8 hex digits>", a)
	}
	if Distinct(nil) != nil {
		t.Error("Distinct(nil) != nil")
	}
}
