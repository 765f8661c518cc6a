package planner

import "testing"

// onGPU0 restricts a claim to devices of the node's GPU 0: it reads a
// per-GPU attribute, so each GPU is judged on its own devices.
const onGPU0 = " && device.attributes['mig.miglayout.io'].parentIndex == 0"

// TestPinnedClaimChoice: a pod whose one device must be on a given GPU is
// served where kube-scheduler may run it, with the device that costs the
// GPU least: an existing free device before a new one, and a new device
// before a free one whose use would take the room of a larger profile.
func TestPinnedClaimChoice(t *testing.T) {
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"only on a node its node selector matches": {
			nodes: []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").label("pool", "b").gpu("A100-SXM4-80GB", "", "").build(),
			},
			pods: []Pod{pod("p", 1).nodeSelector("pool", "b").claim(profileIs("1g.10gb")+onGPU0, 1).build()},
			want: trace{
				Changes: []string{"n2/0: (empty) -> 1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
		"a free device of its profile as it is": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build()},
			pods:  []Pod{pod("p", 1).claim(profileIs("1g.10gb")+onGPU0, 1).build()},
			want:  trace{Served: []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6"}},
		},
		// Taking the free 1g.10gb@6 would keep a 3g.40gb@4 from being
		// made until the pod ends; a 1g.10gb@1 beside the one in use
		// takes no room a larger profile could use.
		"a new device before a free one in the way of a larger profile": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@6", "1g.10gb@0").build()},
			pods:  []Pod{pod("p", 1).claim(profileIs("1g.10gb")+onGPU0, 1).build()},
			want: trace{
				Changes: []string{"n1/0: 1g.10gb@0,1g.10gb@6 -> 1g.10gb@0,1g.10gb@1,1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-1 after change"},
			},
		},
		// Both GPUs take the device alike: the first in the snapshot's
		// order serves it.
		"of GPUs alike but for what the claim reads, the first": {
			nodes: []Node{topologyNode("n1", [2]int{0, 0}, [2]string{"pci0000:00", "pci0000:00"}),
				topologyNode("n2", [2]int{0, 0}, [2]string{"pci0000:80", "pci0000:80"})},
			pods: []Pod{pod("p", 1).claim(profileIs("1g.10gb")+" && device.attributes['resource.kubernetes.io'].pcieRoot != ''", 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n1 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, tc.nodes, tc.pods))
		})
	}
}
