package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestNoRoomNamesDeviceTaintRules: a pod told it waits for room hears that a
// DeviceTaintRule may be what keeps it waiting where one keeps the planner
// from making a device on an Auto GPU, and not otherwise.
func TestNoRoomNamesDeviceTaintRules(t *testing.T) {
	tests := map[string]struct {
		tainted mig.Layout
		want    bool
	}{
		"no DeviceTaintRule":                 {want: false},
		"a DeviceTaintRule taints a 3g.40gb": {tainted: mig.Layout{{Profile: "3g.40gb", Start: 4}}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pu"}}
			snap := planner.Snapshot{Pending: []planner.Pod{{Pod: pod}},
				Nodes: []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, GPUs: []planner.GPU{{Tainted: tc.tainted}}}}}
			a.notify(AutoInputs{}, snap, planner.Result{Unservable: map[string]string{"ns/p": planner.NoRoom}})
			if len(rec.Events) != 1 {
				t.Fatalf("%d events, want 1", len(rec.Events))
			}
			got := <-rec.Events
			if !strings.Contains(got, "WaitingForCapacity") {
				t.Errorf("event %q, want WaitingForCapacity", got)
			}
			if names := strings.Contains(got, "DeviceTaintRule"); names != tc.want {
				t.Errorf("event %q names a DeviceTaintRule: %t, want %t", got, names, tc.want)
			}
		})
	}
}
