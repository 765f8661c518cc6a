package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestPinnedDeviceAlsoSharedIsInUse: a device held by a claim without
// admin access is in use even where a claim with admin access holds it
// too (GPU.Shared and Pinned): the replay of kube-scheduler gives it to no
// pod, so one free 1g.10gb serves one of two pods that ask for one, not
// both.
func TestPinnedDeviceAlsoSharedIsInUse(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "1g.10gb@0").shared("1g.10gb@0").build()}
	x := pod("x", 2).claim(profileIs("1g.10gb"), 1).build()
	y := pod("y", 1).claim(profileIs("1g.10gb"), 1).build()
	snap := Snapshot{Driver: driver, Nodes: nodes, Pending: []Pod{x}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	p := pl.p
	p.accepts["default/y"] = p.accepts["default/x"]
	if _, ok := p.accepts["default/x"]; !ok {
		t.Fatal("pod x: no profiles recorded")
	}
	agrees, ok := p.countsAgree(p.nodes[0], []Pod{x, y}, nil)
	if !ok || agrees {
		t.Errorf("countsAgree(x, y) = %t, %t; want false, true: the pinned 1g.10gb serves neither", agrees, ok)
	}
}
