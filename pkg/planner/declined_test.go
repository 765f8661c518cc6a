package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// TestDeclinedNodes: a node in a pod's Pod.Declined (kube-scheduler did not
// bind it where free devices for it waited) is one the pod is not planned
// on, as though its affinity ruled the node out; other pods still are.
func TestDeclinedNodes(t *testing.T) {
	// n1 has a free 1g.10gb, so a 1g.10gb pod is served there without a
	// change; n2 has one whole device.
	nodes := func() []Node {
		return []Node{
			node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,1g.10gb@6", "4g.40gb@0").build(),
			node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(),
		}
	}
	small := func(name string) *podB { return pod(name, 1).claim(profileIs("1g.10gb"), 1) }
	tests := map[string]struct {
		nodes   []Node
		pending []Pod
		want    trace
	}{
		"served on the free device": {
			nodes:   nodes(),
			pending: []Pod{small("p").build()},
			want: trace{
				Served:     []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6"},
				Unservable: map[string]string{},
			},
		},
		"declined where the free device is: a device is made elsewhere": {
			nodes:   nodes(),
			pending: []Pod{small("p").declined("n1").build()},
			want: trace{
				Changes:    []string{"n2/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:     []string{"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		// Pods alike but for Declined are judged apart: the older q,
		// planned first, takes the free device, and p is not planned on
		// the nodes q may run on.
		"a pod alike planned before": {
			nodes:   nodes(),
			pending: []Pod{small("p").declined("n1").build(), pod("q", 2).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served: []string{
					"default/q -> n1 gpu-0-mig-1g10gb-19-6",
					"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change",
				},
				Unservable: map[string]string{},
			},
		},
		"declined everywhere": {
			nodes:   nodes(),
			pending: []Pod{small("p").declined("n1", "n2").build()},
			want:    trace{Unservable: map[string]string{"default/p": DeclinedEverywhere}},
		},
		// A node the pod's own constraints rule out says so, declined or
		// not.
		"declined on the one node its selector allows": {
			nodes:   nodes(),
			pending: []Pod{small("p").nodeSelector("kubernetes.io/hostname", "n3").declined("n1").build()},
			want:    trace{Unservable: map[string]string{"default/p": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: tc.nodes, Pending: tc.pending})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
