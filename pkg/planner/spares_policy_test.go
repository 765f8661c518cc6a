package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestSparesNeverCostADeviceNorLeaveThePolicy: spares (Policy.Spares) are
// made only where nothing is destroyed, not even a free device moved to make
// room; only of a profile the node's policy allows; and never on a Frozen
// node, which the plan leaves as it is and whose missing spares are not
// reported.
func TestSparesNeverCostADeviceNorLeaveThePolicy(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		want  trace
	}{
		"a spare that needs a free device moved is missing": {
			// A 4g.40gb goes only at memory slice 0, where the free
			// 1g.10gb is: making it would destroy that device.
			nodes: []Node{node("n1").policy(Policy{Spares: map[string]int{"4g.40gb": 1}}).gpu("A100-SXM4-80GB", "1g.10gb@0", "").build()},
			want:  trace{MissingSpares: map[string]int{"n1 4g.40gb": 1}},
		},
		"a spare of a profile the policy does not allow is missing": {
			nodes: []Node{node("n1").policy(Policy{AllowedProfiles: []string{"1g.10gb"}, Spares: map[string]int{"2g.20gb": 1}}).
				gpu("A100-SXM4-80GB", "", "").build()},
			want: trace{MissingSpares: map[string]int{"n1 2g.20gb": 1}},
		},
		"a frozen node gets no spare and reports none missing": {
			nodes: []Node{
				node("lost").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).frozen().gpu("A100-SXM4-80GB", "", "").build(),
				node("live").policy(Policy{Spares: map[string]int{"1g.10gb": 1}}).gpu("A100-SXM4-80GB", "", "").build(),
			},
			want: trace{Changes: []string{"live/0: (empty) -> 1g.10gb@6 keeps spare 1g.10gb"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: tc.nodes, Classes: []*resourceapi.DeviceClass{migClass()}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
