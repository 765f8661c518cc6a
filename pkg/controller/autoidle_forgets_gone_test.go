package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestIdleTrackerForgetsGPUsGone: a GPU no snapshot holds any more (its
// node left Auto mode, or the GPU was taken out) is forgotten: seen idle
// again later, it counts from then, not from when it was first seen idle
// before it went, and is not given back whole early.
func TestIdleTrackerForgetsGPUsGone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	idle := planner.GPU{Info: migslices.PlannedGPU(m, 0), Layout: mig.MustParseLayout("1g.10gb@0")}
	with := func(at time.Time, gpus ...planner.GPU) planner.Snapshot {
		return planner.Snapshot{Now: at, Nodes: []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
			Policy: planner.Policy{ReclaimIdleAfter: time.Minute}, GPUs: gpus}}}
	}
	tr := idleTracker{}
	first := with(t0, idle)
	tr.mark(&first)
	gone := with(t0.Add(time.Hour))
	tr.mark(&gone)
	back := with(t0.Add(2*time.Hour), idle)
	wake := tr.mark(&back)
	if got, want := back.Nodes[0].GPUs[0].IdleSince, t0.Add(2*time.Hour); !got.Equal(want) {
		t.Errorf("IdleSince %s once back, want %s (counted afresh)", got, want)
	}
	if wake != time.Minute {
		t.Errorf("wake in %s once back, want %s", wake, time.Minute)
	}
}
