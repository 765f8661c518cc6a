package planner

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// sizeOf is the pod's size (compute slices) as the planner orders pods, on
// the GPUs of nodes.
func sizeOf(t *testing.T, nodes []Node, pod Pod) int {
	t.Helper()
	pl, err := NewPlanner(t.Context(), Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := pl.p.podSize(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPodSizeOfPrioritizedList: a prioritized list counts as many devices
// as its first (preferred) subrequest asks for, each of the smallest
// profile one device of any subrequest accepts: first one 2g.20gb, else
// two 1g.10gb counts one device of 1g.10gb (one compute slice).
func TestPodSizeOfPrioritizedList(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}
	p := pod("list", 1).firstAvailable(1, profileIs("2g.20gb"), profileIs("1g.10gb")).build()
	p.Claims[0].Spec.Devices.Requests[0].FirstAvailable[1].Count = 2
	if got, want := sizeOf(t, nodes, p), 1; got != want {
		t.Errorf("size of a list preferring one 2g.20gb, else two 1g.10gb: got %d compute slices, want %d", got, want)
	}
}

// TestPodSizeOfClaims: a request counts its devices at the compute slices
// of the smallest profile it accepts; one read per GPU (parentIndex) is
// judged on a GPU of the snapshot of each kind.
func TestPodSizeOfClaims(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}
	tests := map[string]struct {
		pod  Pod
		want int
	}{
		"two devices of any size":          {pod("any", 1).claim("device.attributes['mig.miglayout.io'].memory >= 9000", 2).build(), 2},
		"one device of GPU 0 of a 3g.40gb": {pod("pinned", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build(), 3},
		"one device of any size, on GPU 0": {pod("pinned", 1).claim("device.attributes['mig.miglayout.io'].memory >= 9000 && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build(), 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := sizeOf(t, nodes, tc.pod); got != tc.want {
				t.Errorf("got %d compute slices, want %d", got, tc.want)
			}
		})
	}
}
