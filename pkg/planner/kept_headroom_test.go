package planner

import (
	"testing"
)

// TestKeptPlacementLeavesRoom: among the placements of a waiting pod's
// profile that equally many devices in use are in the way of, the one kept
// is the one whose device leaves the most room for large profiles
// (mig.Model.Headroom), as the pod would be served on an empty GPU: a
// 3g.40gb keeps the right half of an A100, because only the left half takes
// a 4g.40gb. The count of devices in the way comes first, whichever half
// that keeps, and a pod planned after it gets no device in the kept
// placement, not even a free one that exists already.
func TestKeptPlacementLeavesRoom(t *testing.T) {
	const a100 = "A100-SXM4-80GB"
	threeG := pod("three", 1).claim(profileIs("3g.40gb"), 1).build()
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"a device in use in each half: the right half": {
			nodes: []Node{node("n1").gpu(a100, "1g.10gb@1,1g.10gb@5", "1g.10gb@1,1g.10gb@5").build()},
			pods:  []Pod{threeG},
			want:  trace{Kept: map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"}},
		},
		"one device in use over both halves: the right half": {
			nodes: []Node{node("n1").gpu(a100, "7g.80gb@0", "7g.80gb@0").build()},
			pods:  []Pod{threeG},
			want:  trace{Kept: map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"}},
		},
		"a 4g.40gb and a 3g.40gb in use: the right half": {
			nodes: []Node{node("n1").gpu(a100, "4g.40gb@0,3g.40gb@4", "4g.40gb@0,3g.40gb@4").build()},
			pods:  []Pod{threeG},
			want:  trace{Kept: map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"}},
		},
		"fewer devices in the left half's way: the left half": {
			nodes: []Node{node("n1").gpu(a100, "1g.10gb@1,1g.10gb@4,1g.10gb@5", "1g.10gb@1,1g.10gb@4,1g.10gb@5").build()},
			pods:  []Pod{threeG},
			want:  trace{Kept: map[string]string{"default/three": "n1/gpu-0 3g.40gb@0"}},
		},
		"a pod planned after it gets no device in the kept right half": {
			nodes: []Node{node("n1").gpu(a100, "1g.10gb@1,1g.10gb@5,1g.10gb@6", "1g.10gb@1,1g.10gb@5").build()},
			pods:  []Pod{threeG, pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Kept:    map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"},
				Changes: []string{"n1/0: 1g.10gb@1,1g.10gb@5,1g.10gb@6 -> 1g.10gb@0,1g.10gb@1,1g.10gb@5,1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-0 after change"},
			},
		},
		"fewer devices in the right half's way: the right half": {
			nodes: []Node{node("n1").gpu(a100, "1g.10gb@1,1g.10gb@2,1g.10gb@5", "1g.10gb@1,1g.10gb@2,1g.10gb@5").build()},
			pods:  []Pod{threeG},
			want:  trace{Kept: map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"}},
		},
		"a pod planned after it gets no device in the kept half, not even a free one": {
			nodes: []Node{node("n1").gpu(a100, "1g.10gb@1,1g.10gb@2,1g.10gb@5,1g.10gb@6", "1g.10gb@1,1g.10gb@2,1g.10gb@5").build()},
			pods:  []Pod{threeG, pod("small", 1).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Kept:    map[string]string{"default/three": "n1/gpu-0 3g.40gb@4"},
				Changes: []string{"n1/0: 1g.10gb@1,1g.10gb@2,1g.10gb@5,1g.10gb@6 -> 1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@5,1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-0 after change"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}
