package planner

import "testing"

// TestMissingSparesCountsOnlyTheShortfall: the spares a node lacks are the
// policy's count less the free devices of the profile it has or gets, not
// the whole count.
func TestMissingSparesCountsOnlyTheShortfall(t *testing.T) {
	tests := map[string]struct {
		node *nodeB
		want trace
	}{
		"two free devices of three wanted, no room for a third": {
			// The 2g.20gb and 3g.40gb in use fill the rest of the GPU.
			node: node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 3}}).
				gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", "2g.20gb@2,3g.40gb@4"),
			want: trace{MissingSpares: map[string]int{"n1 1g.10gb": 1}},
		},
		"one free device and one made, of three wanted": {
			node: node("n1").policy(Policy{Spares: map[string]int{"1g.10gb": 3}}).
				gpu("A100-SXM4-80GB", "1g.10gb@0,2g.20gb@2,3g.40gb@4", "2g.20gb@2,3g.40gb@4"),
			want: trace{
				Changes:       []string{"n1/0: 1g.10gb@0,2g.20gb@2,3g.40gb@4 -> 1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4 keeps spare 1g.10gb"},
				MissingSpares: map[string]int{"n1 1g.10gb": 1},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, []Node{tc.node.build()}, nil))
		})
	}
}
