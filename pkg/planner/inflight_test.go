package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestPodsOfChangesInFlightKeepTheirDevices: the pods a change in flight is
// for (GPU.Serves) get the devices it brings, whatever the queue's order
// and best fit would say, and no second GPU changes for them.
func TestPodsOfChangesInFlightKeepTheirDevices(t *testing.T) {
	type want struct {
		Served  map[string]string // pod -> node/first device
		Changes []string          // node/gpu: to
	}
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  want
	}{
		"best fit elsewhere does not take the pod away": {
			// n1/gpu-0 (3g in use) is where a 1g.10gb spoils the least,
			// but p1's device is coming on n2.
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p1").build(),
			},
			pods: []Pod{pod("p1", 5).claim(profileIs("1g.10gb"), 1).build()},
			want: want{Served: map[string]string{"default/p1": "n2/gpu-0-mig-1g10gb-19-6"}},
		},
		"a pod of higher priority does not take it either": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p1").build(),
			},
			pods: []Pod{
				pod("p1", 5).claim(profileIs("1g.10gb"), 1).build(),
				pod("urgent", 1).priority(1000).claim(profileIs("1g.10gb"), 1).build(),
			},
			want: want{
				Served:  map[string]string{"default/p1": "n2/gpu-0-mig-1g10gb-19-6", "default/urgent": "n1/gpu-0-mig-1g10gb-19-0"},
				Changes: []string{"n1/0: 1g.10gb@0,3g.40gb@4"},
			},
		},
		"a pod of two devices": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@4,1g.10gb@5", "").changingFor("default/p1").build(),
			},
			pods: []Pod{pod("p1", 5).claim(profileIs("1g.10gb"), 2).build()},
			want: want{Served: map[string]string{"default/p1": "n2/gpu-0-mig-1g10gb-19-4"}},
		},
		"devices that no longer fit: planned like any pod": {
			// The change brings a 2g.20gb, but p1 asks for a 1g.10gb
			// (its claim was recreated).
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build(),
				node("n2").gpu("A100-SXM4-80GB", "2g.20gb@4", "").changingFor("default/p1").build(),
			},
			pods: []Pod{pod("p1", 5).claim(profileIs("1g.10gb"), 1).build()},
			want: want{
				Served:  map[string]string{"default/p1": "n1/gpu-0-mig-1g10gb-19-0"},
				Changes: []string{"n1/0: 1g.10gb@0,3g.40gb@4"},
			},
		},
		"a frozen node's change serves nobody": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/p1").frozen().build(),
			},
			pods: []Pod{pod("p1", 5).claim(profileIs("1g.10gb"), 1).build()},
			want: want{
				Served:  map[string]string{"default/p1": "n1/gpu-0-mig-1g10gb-19-6"},
				Changes: []string{"n1/0: 1g.10gb@6"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: tc.nodes, Pending: tc.pods, Classes: []*resourceapi.DeviceClass{migClass()}})
			if err != nil {
				t.Fatal(err)
			}
			got := want{Served: map[string]string{}}
			for _, s := range res.Served {
				got.Served[s.Pod] = s.Node + "/" + s.Devices[0]
			}
			for _, c := range res.Changes {
				got.Changes = append(got.Changes, c.Node+"/"+itoa(c.GPU)+": "+c.To.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s\nunservable %v", diff, res.Unservable)
			}
		})
	}
}
