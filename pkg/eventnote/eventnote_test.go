package eventnote

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/test/eventstest"
)

// TestDistinctRecordsEveryChangeOfNote: events of one object, reason and
// action reach the API server as an event of their own each time the note
// changes, a note that comes back after another included, while a repeat
// of the note just recorded is folded into its series; the recorder alone
// keeps the first event and folds every later one into it.
func TestDistinctRecordsEveryChangeOfNote(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	causes := []string{"DeviceInUse", "DeviceInUse", "ResetRequired", "DeviceInUse", "ResetRequired"}
	for name, tc := range map[string]struct {
		wrap func(r events.EventRecorder) events.EventRecorder
		// stored is how many events the API server holds after each
		// cause is recorded.
		stored []int
		want   []string
	}{
		"distinct": {
			wrap:   func(r events.EventRecorder) events.EventRecorder { return Distinct(Distinct(r)) },
			stored: []int{1, 1, 2, 3, 4},
			want: []string{"gpu 0 is blocked: DeviceInUse", "gpu 0 is blocked: DeviceInUse",
				"gpu 0 is blocked: ResetRequired", "gpu 0 is blocked: ResetRequired"},
		},
		"plain recorder": {
			wrap:   func(r events.EventRecorder) events.EventRecorder { return r },
			stored: []int{1, 1, 1, 1, 1},
			want:   []string{"gpu 0 is blocked: DeviceInUse"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			raw, notes := eventstest.Recorder(t, scheme, "test")
			rec := tc.wrap(raw)
			for i, cause := range causes {
				rec.Eventf(pod, nil, corev1.EventTypeWarning, "Blocked", "RepartitionGPU0", "gpu 0 is blocked: %s", cause)
				notes(tc.stored[i]) // stored before the next is recorded
			}
			if diff := cmp.Diff(tc.want, notes(len(tc.want))); diff != "" {
				t.Errorf("notes at the API server (-want +got):\n%s", diff)
			}
		})
	}
}

// capture records the actions of the events it is given.
type capture struct{ actions []string }

func (c *capture) Eventf(_, _ runtime.Object, _, _, action, _ string, _ ...any) {
	c.actions = append(c.actions, action)
}

// TestDistinctActions: the first event of a series key is Action of its
// note, a repeat reuses the last action, a changed note chains to it; keys
// quiet for longer than the recorder folds repeats are forgotten (their
// next event starts afresh), and the other keys are kept apart.
func TestDistinctActions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &capture{}
	d := distinctWithClock(c, func() time.Time { return now }).(*distinct)
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)}}
	}
	record := func(p *corev1.Pod, note string) { d.Eventf(p, nil, "Normal", "Waiting", "Plan", "%s", note) }

	record(pod("a"), "A")
	record(pod("a"), "A")
	record(pod("a"), "B")
	record(pod("b"), "A")
	now = now.Add(forget + time.Minute)
	record(pod("b"), "A")
	record(pod("a"), "B")

	first := Action("Plan", "A")
	chained := Action("Plan", "B\x00"+first)
	want := []string{first, first, chained, first, first, Action("Plan", "B")}
	if diff := cmp.Diff(want, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if len(d.last) != 2 {
		t.Errorf("%d series keys remembered, want 2: %v", len(d.last), d.last)
	}
	if Distinct(nil) != nil {
		t.Error("Distinct(nil) != nil")
	}
	if a := Action("Plan", "A"); len(a) != len("Plan-")+8 || a[:5] != "Plan-" || a == Action("Plan", "B") {
		t.Errorf("Action = %q: want Plan-<8 hex digits>, differing by note", a)
	}
}
