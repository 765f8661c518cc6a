package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	"github.com/miglayout/miglayout/test/eventstest"
)

// TestEventsOfSeveralNodesAreAllRecorded: a MigLayout's events of one
// reason about two nodes, or two GPUs of a node, all reach the API server
// with their notes.
func TestEventsOfSeveralNodesAreAllRecorded(t *testing.T) {
	rec, notes := eventstest.Recorder(t, testScheme(t), Name)
	r := &Reconciler{Recorder: eventnote.Distinct(rec)}
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "ml", UID: "u"}}
	prev := v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{
		{Node: "a", GPUs: []v1alpha1.GPURow{{Index: 0, Actual: "7g.80gb@0"}}, Phase: v1alpha1.PhasePending},
		{Node: "b", GPUs: []v1alpha1.GPURow{{Index: 0, Actual: "7g.80gb@0"}}, Phase: v1alpha1.PhasePending},
		{Node: "c", GPUs: []v1alpha1.GPURow{{Index: 0}, {Index: 1}}, Phase: v1alpha1.PhasePending}}}
	stuck := func(gpu int32) StuckGPU {
		return StuckGPU{GPU: gpu, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "in use"}
	}
	obs := Observation{Nodes: []NodeState{
		{Row: v1alpha1.NodeRow{Node: "a", GPUs: []v1alpha1.GPURow{{Index: 0, Desired: "3g.40gb@0", Actual: "3g.40gb@0"}}}, Ready: true},
		{Row: v1alpha1.NodeRow{Node: "b", GPUs: []v1alpha1.GPURow{{Index: 0, Desired: "3g.40gb@0", Actual: "3g.40gb@0"}}}, Ready: true},
		{Row: v1alpha1.NodeRow{Node: "c"}, Stuck: []StuckGPU{stuck(0), stuck(1)}},
	}}
	evts, _ := Transitions(&prev, obs, nil)
	r.record(ml, evts)
	want := []string{`node a holds the desired layout; changed: gpu 0 "3g.40gb@0"`, `node b holds the desired layout; changed: gpu 0 "3g.40gb@0"`,
		"node c gpu 0 is blocked (DeviceInUse): in use", "node c gpu 1 is blocked (DeviceInUse): in use"}
	if diff := cmp.Diff(want, notes(len(want))); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}

// TestMigLayoutEventsWithNewNotesAreAllRecorded: a MigLayout's events of one
// reason about the same node and GPU whose notes differ (blocked by one
// cause, then another) both reach the API server with their notes.
func TestMigLayoutEventsWithNewNotesAreAllRecorded(t *testing.T) {
	rec, notes := eventstest.Recorder(t, testScheme(t), Name)
	r := &Reconciler{Recorder: eventnote.Distinct(rec)}
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "ml", UID: "u"}}
	event := func(note string) Event {
		return Event{Type: corev1.EventTypeWarning, Reason: "GPUBlocked", Action: gpuAction("Repartition", 0), Note: note, Node: "c"}
	}
	r.record(ml, []Event{event("node c gpu 0 is blocked (DeviceInUse): in use")})
	notes(1) // at the API server before the next
	r.record(ml, []Event{event("node c gpu 0 is blocked (ResetRequired): pending")})
	want := []string{"node c gpu 0 is blocked (DeviceInUse): in use", "node c gpu 0 is blocked (ResetRequired): pending"}
	if diff := cmp.Diff(want, notes(len(want))); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}

// TestPodPlannedOntoAnotherGPUHearsIt: a pod whose plan changes from one
// GPU to another (its first change was cancelled) reads the new target in
// its events, not only a repeat count on the first.
func TestPodPlannedOntoAnotherGPUHearsIt(t *testing.T) {
	rec, notes := eventstest.Recorder(t, testScheme(t), Name)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &AutoPlanner{Recorder: eventnote.Distinct(rec), Now: func() time.Time { return now }}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
	snap := planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}
	plan := func(gpu int, dev string) planner.Result {
		return planner.Result{
			Changes: []planner.Change{{Node: "n1", GPU: gpu, To: mig.MustParseLayout("1g.10gb@0"), Serves: []string{"ns/p"}}},
			Served:  []planner.Placement{{Pod: "ns/p", Node: "n1", Devices: []string{dev}, NeedsChange: true}},
		}
	}
	a.notify(AutoInputs{}, snap, plan(0, "gpu-0-mig-1g10gb-19-0"))
	now = now.Add(time.Minute)
	a.notify(AutoInputs{}, snap, plan(1, "gpu-1-mig-1g10gb-19-0"))
	want := []string{
		"waiting for the repartition of n1/gpu-0: 1g.10gb@0 (a device such as gpu-0-mig-1g10gb-19-0)",
		"waiting for the repartition of n1/gpu-1: 1g.10gb@0 (a device such as gpu-1-mig-1g10gb-19-0)",
	}
	if diff := cmp.Diff(want, notes(len(want))); diff != "" {
		t.Errorf("events recorded (-want +got):\n%s", diff)
	}
}
