package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestWaitingForRepartitionNamesTheGPUBeingChanged: a pod served by a
// device that exists already on GPU 0 and one still to be made on GPU 1
// hears WaitingForRepartition about GPU 1 (its action and its node's
// NodeMigLayout), the GPU it waits for, not the first GPU it is given a
// device on. Whether a device exists is read from its own GPU's layout:
// GPU 0 has a 3g.40gb@4, GPU 1 does not yet.
func TestWaitingForRepartitionNamesTheGPUBeingChanged(t *testing.T) {
	rec := &events.FakeRecorder{Events: make(chan string, 10), Verbose: true}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return now }}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
	nml := nodeMigLayout("n1").status(a100(0).layout("1g.10gb@0,3g.40gb@4"), a100(1).layout("7g.80gb@0")).build()
	in := AutoInputs{NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}}
	res := planner.Result{
		Served: []planner.Placement{{Pod: "ns/p", Node: "n1", NeedsChange: true,
			Devices: []string{migslices.MIGDeviceName(0, "1g.10gb", 19, 0), migslices.MIGDeviceName(1, "3g.40gb", 9, 4)}}},
		Changes: []planner.Change{{Node: "n1", GPU: 1, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p"}}},
	}
	a.notify(in, planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}, res)
	if len(rec.Events) != 1 {
		t.Fatalf("%d events, want 1", len(rec.Events))
	}
	ev := <-rec.Events
	if want := "Normal " + EventWaitingForRepartition + " " + gpuAction("Plan", 1) + " "; !strings.HasPrefix(ev, want) {
		t.Errorf("event %q, want it to start with %q", ev, want)
	}
}

// TestPodPendingAgainHearsAgain: a pod still pending for the same reason a
// minute later does not hear it again; one that was not pending in between
// (out of the demand for a pass) is forgotten, and hears why it waits
// again.
func TestPodPendingAgainHearsAgain(t *testing.T) {
	for name, tc := range map[string]struct {
		leaves     bool
		wantEvents int
	}{
		"still pending": {wantEvents: 1},
		"pending again": {leaves: true, wantEvents: 2},
	} {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return now }}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
			pending := planner.Snapshot{Pending: []planner.Pod{{Pod: pod}}}
			res := planner.Result{Unservable: map[string]string{"ns/p": planner.NoRoom}}
			a.notify(AutoInputs{}, pending, res)
			now = now.Add(time.Minute)
			if tc.leaves {
				a.notify(AutoInputs{}, planner.Snapshot{}, planner.Result{})
				now = now.Add(time.Minute)
			}
			a.notify(AutoInputs{}, pending, res)
			if got := len(rec.Events); got != tc.wantEvents {
				t.Errorf("%d events, want %d", got, tc.wantEvents)
			}
		})
	}
}
