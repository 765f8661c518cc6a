package eventnote

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A series key quiet for exactly forget is still remembered (only longer
// is forgotten), and keys are looked at again once a full minute has passed
// since the last look: a key past forget at that look is forgotten.
func TestDistinctForgetAndLookBoundaries(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &capture{}
	d := distinctWithClock(c, func() time.Time { return now })
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)}}
	}
	record := func(p *corev1.Pod, note string) { d.Eventf(p, nil, "Normal", "Waiting", "Plan", "%s", note) }

	record(pod("a"), "A") // a look: nothing to forget
	record(pod("b"), "A")
	now = now.Add(forget)
	record(pod("a"), "B") // a look: a and b quiet for exactly forget, both kept
	now = now.Add(time.Minute)
	record(pod("b"), "B") // a look a minute after the last: b, quiet for longer, forgotten

	first := Action("Plan", "A")
	want := []string{first, first, Action("Plan", "B\x00"+first), Action("Plan", "B")}
	if diff := cmp.Diff(want, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}
