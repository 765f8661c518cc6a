package planner

import "testing"

// TestKeptPlacementPrefersReleasingDevices: a pod of a large profile that no
// GPU can take now keeps the placement whose devices in the way are being
// released (GPU.Releasing: their pods are terminating) before one a device
// staying in use blocks, even where more releasing devices are in the way;
// the smaller pods planned after it then take the room that stays, not the
// room the releases leave.
func TestKeptPlacementPrefersReleasingDevices(t *testing.T) {
	// gpu-0's left half holds one 1g.10gb in use for good; gpu-1's holds
	// two 2g.20gb whose pods are terminating. Both right halves are in use.
	nodes := func(releasing string) []Node {
		return []Node{node("n1").
			gpu("A100-SXM4-80GB", "1g.10gb@0,3g.40gb@4", "1g.10gb@0,3g.40gb@4").
			gpu("A100-SXM4-80GB", "2g.20gb@0,2g.20gb@2,3g.40gb@4", "2g.20gb@0,2g.20gb@2,3g.40gb@4").releasing(releasing).
			build()}
	}
	big := pod("big", 9).claim(profileIs("4g.40gb"), 1).build()
	small := pod("small", 1).claim(profileIs("2g.20gb"), 1).build()
	tests := map[string]struct {
		releasing string
		nodes     []Node // nodes(releasing) where nil
		pods      []Pod  // big and small where nil
		want      trace
	}{
		"no claim ends: the placement with the fewest devices in the way": {
			releasing: "",
			want: trace{
				Kept:       map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		"the claims of gpu-1's left half end: that half is kept": {
			releasing: "2g.20gb@0,2g.20gb@2",
			want: trace{
				Kept:    map[string]string{"default/big": "n1/gpu-1 4g.40gb@0"},
				Changes: []string{"n1/0: 1g.10gb@0,3g.40gb@4 -> 1g.10gb@0,2g.20gb@2,3g.40gb@4 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-2g20gb-14-2 after change"},
			},
		},
		"one of them ends: still fewer devices in use for good there": {
			releasing: "2g.20gb@2",
			want: trace{
				Kept:       map[string]string{"default/big": "n1/gpu-0 4g.40gb@0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		"GPUs alike but for a releasing device are told apart": {
			nodes: []Node{node("n1").
				gpu("A100-SXM4-80GB", "4g.40gb@0,3g.40gb@4", "4g.40gb@0,3g.40gb@4").
				gpu("A100-SXM4-80GB", "4g.40gb@0,3g.40gb@4", "4g.40gb@0,3g.40gb@4").releasing("4g.40gb@0").
				build()},
			want: trace{
				Kept:       map[string]string{"default/big": "n1/gpu-1 4g.40gb@0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		"the half of a GPU whose claims end, not the one a 3g.40gb is placed in on an empty GPU": {
			nodes: []Node{node("n1").
				gpu("A100-SXM4-80GB", "2g.20gb@0,1g.10gb@4", "2g.20gb@0,1g.10gb@4").releasing("2g.20gb@0").
				build()},
			pods: []Pod{pod("half", 9).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{Kept: map[string]string{"default/half": "n1/gpu-0 3g.40gb@0"}},
		},
		"the half with the fewest devices whose claims end": {
			nodes: []Node{node("n1").
				gpu("A100-SXM4-80GB", "2g.20gb@0,1g.10gb@4,1g.10gb@5", "2g.20gb@0,1g.10gb@4,1g.10gb@5").releasing("2g.20gb@0,1g.10gb@4,1g.10gb@5").
				build()},
			pods: []Pod{pod("half", 9).claim(profileIs("3g.40gb"), 1).build()},
			want: trace{Kept: map[string]string{"default/half": "n1/gpu-0 3g.40gb@0"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes(tc.releasing)
			}
			pods := tc.pods
			if pods == nil {
				pods = []Pod{big, small}
			}
			checkTrace(t, tc.want, planTrace(t, ns, pods))
		})
	}
}
