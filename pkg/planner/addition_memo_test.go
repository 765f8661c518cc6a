package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestAdditionOnAGPUWithTaintedDevicesMakesNoneOfThem: a device that a
// DeviceTaintRule names (GPU.Tainted) is not made on its GPU, even after
// the same device was made for another pod on a GPU of the same model and
// layout that no rule names.
func TestAdditionOnAGPUWithTaintedDevicesMakesNoneOfThem(t *testing.T) {
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "", "").build(),
		node("n2").gpu("A100-SXM4-80GB", "", "").tainted("1g.10gb@6").build(),
	}
	pods := []Pod{
		pod("first", 2).claim(profileIs("1g.10gb"), 1).build(),
		pod("second", 1).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).build(),
	}
	got := planTrace(t, nodes, pods)
	served := map[string]string{}
	for _, s := range got.Served {
		pod, rest, _ := strings.Cut(s, " -> ")
		served[pod] = rest
	}
	if s, ok := served["default/second"]; !ok || !strings.HasPrefix(s, "n2 ") {
		t.Fatalf("pod second not served on n2: %+v", got)
	}
	if strings.Contains(served["default/second"], "gpu-0-mig-1g10gb-19-6") {
		t.Errorf("pod second served by the device a DeviceTaintRule names: %+v", got)
	}
}

// TestAdditionKeepsDevicesSharedOnTheirGPU: a device held by claims with
// admin access only (GPU.Shared) is not destroyed, even after the same
// change was planned on a GPU of the same model and layout where that
// device is free: the large pod waits with a placement kept instead.
func TestAdditionKeepsDevicesSharedOnTheirGPU(t *testing.T) {
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "").build(),
		node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0", "").shared("1g.10gb@0").build(),
	}
	pods := []Pod{
		pod("first", 2).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("7g.80gb"), 1).build(),
		pod("second", 1).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("7g.80gb"), 1).build(),
	}
	want := trace{
		Changes: []string{"n1/0: 1g.10gb@0 -> 7g.80gb@0 serves default/first"},
		Served:  []string{"default/first -> n1 gpu-0-mig-7g80gb-0-0 after change"},
		Kept:    map[string]string{"default/second": "n2/gpu-0 7g.80gb@0"},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}

// TestAddAfterAMissingSpareMayDestroyAFreeDevice: a spare is made only
// where it destroys nothing, but a pod added to the plan afterwards may
// have a free device destroyed for it, as in a whole plan of it.
func TestAddAfterAMissingSpareMayDestroyAFreeDevice(t *testing.T) {
	// A 4g.40gb goes only at memory slice 0, where the free 1g.10gb is.
	nodes := []Node{node("n1").policy(Policy{Spares: map[string]int{"4g.40gb": 1}}).gpu("A100-SXM4-80GB", "1g.10gb@0", "").build()}
	snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	pl, err := NewPlanner(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(context.Background(), pod("p", 1).claim(profileIs("4g.40gb"), 1).build()); err != nil {
		t.Fatal(err)
	}
	want := trace{
		Changes:       []string{"n1/0: 1g.10gb@0 -> 4g.40gb@0 serves default/p"},
		Served:        []string{"default/p -> n1 gpu-0-mig-4g40gb-5-0 after change"},
		MissingSpares: map[string]int{"n1 4g.40gb": 1},
	}
	checkTrace(t, want, toTrace(pl.Result()))
}

// TestAdditionLeavesAKeptPlacementAlone: a pod planned after one that
// waits with a placement kept for it gets no device in that placement,
// even after a device was made there for another pod on a GPU of the same
// model and layout that keeps nothing.
func TestAdditionLeavesAKeptPlacementAlone(t *testing.T) {
	// The 1g.10gb in use keeps the only 4g.40gb placement from being made.
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
		node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
	}
	pods := []Pod{
		pod("big", 3).claim(profileIs("4g.40gb"), 1).build(),
		pod("there", 2).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).build(),
		pod("here", 1).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("1g.10gb"), 1).build(),
	}
	got := planTrace(t, nodes, pods)
	if diff := cmp.Diff(map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"}, got.Kept); diff != "" {
		t.Fatalf("kept (-want +got):\n%s\nplan: %+v", diff, got)
	}
	var here string
	for _, s := range got.Served {
		if strings.HasPrefix(s, "default/here -> n1 ") {
			here = s + " "
		}
	}
	if here == "" {
		t.Fatalf("pod here not served on n1: %+v", got)
	}
	for _, start := range []string{"-0 ", "-1 ", "-2 ", "-3 "} {
		if strings.Contains(here, "gpu-0-mig-1g10gb-19"+start) {
			t.Errorf("pod here served in the placement kept for big (memory slices 0-3): %s", here)
		}
	}
}

// TestKeptPlacementHoldsAfterAnEarlierPodLookedAtTheGPU: a GPU keeps the
// placement of a waiting pod from the pods planned after it, even where a
// pod planned before it (a) weighed a device there and was served
// elsewhere: the device it weighed lies in the placement now kept.
func TestKeptPlacementHoldsAfterAnEarlierPodLookedAtTheGPU(t *testing.T) {
	nodes := []Node{
		// The 1g.10gb in use keeps the only 4g.40gb placement from being
		// made.
		node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build(),
		// Full but for a free 1g.10gb, which a takes.
		node("full").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@0,2g.20gb@2,3g.40gb@4").build(),
	}
	pods := []Pod{
		pod("a", 3).priority(10).claim(profileIs("1g.10gb"), 1).build(),
		pod("big", 2).claim(profileIs("4g.40gb"), 1).build(),
		pod("b", 1).claim(profileIs("1g.10gb"), 1).build(),
	}
	got := planTrace(t, nodes, pods)
	if diff := cmp.Diff(map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"}, got.Kept); diff != "" {
		t.Fatalf("kept (-want +got):\n%s\nplan: %+v", diff, got)
	}
	for _, s := range got.Served {
		if !strings.HasPrefix(s, "default/b -> ") {
			continue
		}
		for _, start := range []string{"-0 ", "-1 ", "-2 ", "-3 "} {
			if strings.Contains(s+" ", "gpu-0-mig-1g10gb-19"+start) && strings.HasPrefix(s, "default/b -> n1 ") {
				t.Errorf("pod b served in the placement kept for big (memory slices 0-3): %s", s)
			}
		}
	}
}
