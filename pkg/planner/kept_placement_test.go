package planner

import (
	"testing"
)

// TestKeptPlacementStaysFreeForItsPod: a placement kept for a pod of a large
// profile (Result.Kept) drains as the claims on it end: no pod planned after
// it gets a device overlapping it, not even a free device that exists
// already, whether the pod asks for one device, names the GPU (a per-GPU
// attribute) or asks for several devices.
func TestKeptPlacementStaysFreeForItsPod(t *testing.T) {
	// The 7g.80gb waits for the 1g.10gb in use at memory slice 6; the free
	// 1g.10gb devices at 0 and 1 lie in its placement.
	gpu0 := func() *nodeB {
		return node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,1g.10gb@6", "1g.10gb@6")
	}
	big := pod("big", 9).claim(profileIs("7g.80gb"), 1).build()
	kept := map[string]string{"default/big": "n1/gpu-0 7g.80gb@0"}
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"a pod of one device": {
			nodes: []Node{gpu0().build()},
			pods:  []Pod{big, pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want:  trace{Kept: kept, Unservable: map[string]string{"default/small": NoRoom}},
		},
		"a pod of one device that names the GPU": {
			nodes: []Node{gpu0().build()},
			pods:  []Pod{big, pod("gpu0", 1).claim(profileIs("1g.10gb")+" && device.attributes['mig.miglayout.io'].parentIndex == 0", 1).build()},
			want:  trace{Kept: kept, Unservable: map[string]string{"default/gpu0": NoRoom}},
		},
		"a pod of two devices": {
			nodes: []Node{gpu0().build()},
			pods:  []Pod{big, pod("pair", 1).claim(profileIs("1g.10gb"), 2).build()},
			want:  trace{Kept: kept, Unservable: map[string]string{"default/pair": NoRoom}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}
