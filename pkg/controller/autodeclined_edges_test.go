package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// declinedEventAt is the controller's event leaving node out of the plans
// of pod uid for keptFor, last seen at last.
func declinedEventAt(uid types.UID, node string, keptFor time.Duration, last time.Time) eventsv1.Event {
	return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: uid},
		ReportingController: Name, Reason: EventSchedulerDeclinedNode, EventTime: metav1.NewMicroTime(last),
		Note: declinedNote(declination{node: node, devices: []string{"gpu-0-mig-1g10gb-19-6"}, waited: time.Minute, keptFor: keptFor})}
}

// TestDeclinedNodesEdges: an event on a pod without UID is skipped; a
// series without a last observation counts from the event's time; of two
// events of one pod and node, the one that ends last counts, in whichever
// order they are read.
func TestDeclinedNodesEdges(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	noUID := declinedEventAt("", "n1", time.Hour, at)
	seriesUnobserved := declinedEventAt("p1", "n2", 20*time.Minute, at.Add(-10*time.Minute))
	seriesUnobserved.Series = &eventsv1.EventSeries{Count: 2}
	for name, tc := range map[string]struct {
		events []eventsv1.Event
		want   map[types.UID][]string
	}{
		"a pod without UID": {events: []eventsv1.Event{noUID}, want: map[types.UID][]string{}},
		"a series without a last observation": {events: []eventsv1.Event{seriesUnobserved},
			want: map[types.UID][]string{"p1": {"n2"}}},
		"the later ending read first": {events: []eventsv1.Event{
			declinedEventAt("p1", "n1", time.Hour, at.Add(-time.Minute)), declinedEventAt("p1", "n1", 10*time.Minute, at.Add(-30*time.Minute))},
			want: map[types.UID][]string{"p1": {"n1"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DeclinedNodes(tc.events, at, 10*time.Minute)); diff != "" {
				t.Errorf("DeclinedNodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeclinesNotRestoredWithoutLength: an event whose note gives no
// positive length declines nothing, and does not count as a decline for
// the next one's length.
func TestDeclinesNotRestoredWithoutLength(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, length := range []time.Duration{0, -10 * time.Minute} {
		var tr declineTracker
		tr.restore(declinedEvents([]eventsv1.Event{declinedEventAt("p1", "n1", length, at)}, at), 10*time.Minute)
		if r := tr.declined["p1"]["n1"]; r != nil {
			t.Errorf("an event of length %s restored as %+v, want nothing", length, r)
		}
	}
}

// TestDeclineTrackerObserve: a pod's node is declined once its free
// devices have been allocatable for unboundAfter exactly, not while its
// GPU is not Ready; a plan that serves the pod with a change in between
// or with a device its agent does not report (yet), starts the wait
// over; a wait that led to a decline is no longer due.
func TestDeclineTrackerObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}}
	devices := []string{"gpu-0-mig-1g10gb-19-6"}
	inputs := func(phase v1alpha1.GPUPhase, layout string) AutoInputs {
		nml := nodeMigLayout("n1").status(a100(0).layout(layout).phase(phase, "", "")).build()
		return AutoInputs{NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}}
	}
	type plan struct {
		after       time.Duration
		notReady    bool // n1's GPU is repartitioning
		needsChange bool // the plan serves the pod with a change
		gone        bool // the device is not in n1's reported layout (a change in flight)
	}
	for name, tc := range map[string]struct {
		plans        []plan
		wantDeclined int
	}{
		"allocatable for unboundAfter exactly":       {plans: []plan{{after: 0}, {after: time.Minute}}, wantDeclined: 1},
		"the GPU not Ready once the wait is reached": {plans: []plan{{after: 0}, {after: 61 * time.Second, notReady: true}}},
		"served with a change in between": {plans: []plan{{after: 0}, {after: 30 * time.Second}, {after: 40 * time.Second, needsChange: true},
			{after: 50 * time.Second}, {after: 80 * time.Second}}},
		"its device gone in between": {plans: []plan{{after: 0}, {after: 30 * time.Second}, {after: 40 * time.Second, gone: true},
			{after: 50 * time.Second}, {after: 80 * time.Second}}},
	} {
		t.Run(name, func(t *testing.T) {
			var tr declineTracker
			var declined []declination
			var now time.Time
			for _, p := range tc.plans {
				now = t0.Add(p.after)
				phase, layout := v1alpha1.PhaseReady, "4g.40gb@0,1g.10gb@6"
				if p.notReady {
					phase = v1alpha1.PhaseRepartitioning
				}
				if p.gone {
					layout = "7g.80gb@0"
				}
				in := inputs(phase, layout)
				snap := &planner.Snapshot{Now: now, Pending: []planner.Pod{{Pod: pod}}}
				res := planner.Result{Served: []planner.Placement{{Pod: "ns/p", Node: "n1", Devices: devices, NeedsChange: p.needsChange}}}
				declined = tr.observe(in, snap, res, time.Minute, 10*time.Minute, true)
			}
			if len(declined) != tc.wantDeclined {
				t.Errorf("declined %d times in the last plan, want %d: %+v", len(declined), tc.wantDeclined, declined)
			}
			if tc.wantDeclined > 0 {
				if due := tr.overdue(now.Add(time.Second), time.Minute); due != "" {
					t.Errorf("a second after the decline, waits due %q, want none", due)
				}
			}
		})
	}
}

// TestDeclineTrackerObserveSortsDeclined: a node declined for a pod joins
// the nodes declined for it before in order, so the pod's plan inputs read
// the same whatever the order of its declines.
func TestDeclineTrackerObserveSortsDeclined(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}}
	nml := nodeMigLayout("n1").status(a100(0).layout("4g.40gb@0,1g.10gb@6")).build()
	in := AutoInputs{NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}}
	res := planner.Result{Served: []planner.Placement{{Pod: "ns/p", Node: "n1", Devices: []string{"gpu-0-mig-1g10gb-19-6"}}}}
	var tr declineTracker
	var snap *planner.Snapshot
	for _, at := range []time.Time{t0, t0.Add(time.Minute)} {
		snap = &planner.Snapshot{Now: at, Pending: []planner.Pod{{Pod: pod, Declined: []string{"n2"}}}}
		tr.observe(in, snap, res, time.Minute, 10*time.Minute, true)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, snap.Pending[0].Declined); diff != "" {
		t.Errorf("declined nodes (-want +got):\n%s", diff)
	}
}
