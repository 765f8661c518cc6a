package eventnote

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// event is one Eventf call.
type event struct {
	regarding, related runtime.Object
	eventtype, reason  string
}

// TestDistinctKeepsSeriesKeysApart: events that differ in any part of the
// recorder's series key (the regarding or related object, its UID
// included, the type, the reason) are separate series: the first event of
// each gets the action of its own note, not one chained to another
// series' note.
func TestDistinctKeepsSeriesKeysApart(t *testing.T) {
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	ref := func(uid string) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: types.UID(uid)}
	}
	for name, tc := range map[string][2]event{
		"regarding objects":               {{pod("a", "u1"), nil, "Normal", "Waiting"}, {pod("b", "u2"), nil, "Normal", "Waiting"}},
		"a pod made again under its name": {{pod("a", "u1"), nil, "Normal", "Waiting"}, {pod("a", "u2"), nil, "Normal", "Waiting"}},
		"an object reference made again":  {{ref("u1"), nil, "Normal", "Waiting"}, {ref("u2"), nil, "Normal", "Waiting"}},
		"related objects":                 {{pod("a", "u1"), pod("x", "u3"), "Normal", "Waiting"}, {pod("a", "u1"), pod("y", "u4"), "Normal", "Waiting"}},
		"types":                           {{pod("a", "u1"), nil, "Normal", "Waiting"}, {pod("a", "u1"), nil, "Warning", "Waiting"}},
		"reasons":                         {{pod("a", "u1"), nil, "Normal", "Waiting"}, {pod("a", "u1"), nil, "Normal", "Blocked"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := &capture{}
			d := Distinct(c)
			for i, note := range []string{"A", "B"} {
				e := tc[i]
				d.Eventf(e.regarding, e.related, e.eventtype, e.reason, "Plan", "%s", note)
			}
			want := []string{Action("Plan", "A"), Action("Plan", "B")}
			if diff := cmp.Diff(want, c.actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDistinctOfDistinctHashesOnce: wrapping a recorder Distinct returned
// again changes nothing: the action of a first event is Action of its note
// once, not a hash of a hash.
func TestDistinctOfDistinctHashesOnce(t *testing.T) {
	c := &capture{}
	var rec events.EventRecorder = Distinct(Distinct(c))
	rec.Eventf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}, nil, "Normal", "Waiting", "Plan", "%s", "A")
	if diff := cmp.Diff([]string{Action("Plan", "A")}, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestDistinctRemembersAQuietSeriesUntilForgotten: a series key quiet for
// longer than the recorder folds repeats (6 minutes) but less than forget
// is still remembered: its next note is chained to the last action, so a
// note coming back later is not taken for an old one. Keys are looked at for
// forgetting at most once a minute: one that came of age since is kept
// until then.
func TestDistinctRemembersAQuietSeriesUntilForgotten(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &capture{}
	d := distinctWithClock(c, func() time.Time { return now })
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)}}
	}
	record := func(p *corev1.Pod, note string) { d.Eventf(p, nil, "Normal", "Waiting", "Plan", "%s", note) }

	record(pod("a"), "A")
	now = now.Add(10 * time.Minute)
	record(pod("a"), "B") // remembered: chained
	first := Action("Plan", "A")
	chained := Action("Plan", "B\x00"+first)

	// b's key comes of age 30 seconds after a look: kept until the next.
	record(pod("b"), "A")
	now = now.Add(forget - 30*time.Second)
	record(pod("a"), "C") // a look: b is not old enough yet
	now = now.Add(40 * time.Second)
	record(pod("b"), "B") // no look within the minute: b still remembered

	want := []string{first, chained, first, Action("Plan", "C\x00"+chained), Action("Plan", "B\x00"+first)}
	if diff := cmp.Diff(want, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}
