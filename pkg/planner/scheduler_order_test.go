package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
)

// The plan never promises a pod a device the scheduler gives, first, to
// another pod of the node: kube-scheduler's allocator knows nothing of the
// plan's reservations and takes, for each request, the first device it
// accepts in publication order (smallest first, then by GPU index and
// placement, slices.SortDevices), and for a prioritized list the first
// subrequest it can satisfy. In every case below the pod planned first has
// the higher priority, so the planner and the scheduler both take it
// first; the way the plan would serve the second pod hands its device to
// the first, so the second is not promised one now (it is planned again
// once the first is bound), and every pod the plan serves gets its devices
// from the scheduler in either order.
func TestPlanLaterDeviceNotTakenByEarlierPod(t *testing.T) {
	anyMIG := "device.attributes['mig.miglayout.io'].memory >= 9000"
	tests := map[string]struct {
		nodes  []Node
		pods   []Pod
		served []string
	}{
		// any2 (two devices of any size) is served by the two free
		// 2g.20gb as they are; a 1g.10gb created beside them for small
		// would go to any2, which takes the smallest devices it accepts.
		"a pod of several devices of any size gets a smaller device created later for another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "2g.20gb@0,2g.20gb@2", "").build()},
			pods: []Pod{pod("any2", 1).priority(10).claim(anyMIG, 2).build(),
				pod("small", 5).claim(profileIs("1g.10gb"), 1).build()},
			served: []string{"default/any2"},
		},
		// The same with one device: any1 is served by the free
		// 1g.20gb of GPU 1; a 1g.10gb created on GPU 0 for small would
		// go to any1 (smaller).
		"a pod of one device of any size gets a smaller device created later for another pod": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").
				gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.20gb@6", "4g.40gb@0,2g.20gb@4").build()},
			pods: []Pod{pod("any1", 1).priority(10).claim(anyMIG, 1).build(),
				pod("small", 5).claim(profileIs("1g.10gb"), 1).build()},
			served: []string{"default/any1"},
		},
		// one is served by the free 1g.10gb of GPU 1; three new
		// 1g.10gb on GPU 0 for set (three on one GPU) would be published
		// first, and one would take one of them, breaking up set.
		"a pod of one device gets a device of its profile created later on a lower GPU for a matchAttribute set": {
			nodes: []Node{withUUIDs(node("n1").gpu("A100-SXM4-80GB", "", "").
				gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", "4g.40gb@0,2g.20gb@4").build())},
			pods: []Pod{pod("one", 1).priority(10).claim(profileIs("1g.10gb"), 1).build(),
				pod("set", 5).claim(profileIs("1g.10gb"), 3).sameGPU("parentUUID").build()},
			served: []string{"default/one"},
		},
		// flex prefers a device of 15000 MiB or more, else a 1g.10gb:
		// planned first, it gets the free 1g.10gb@6 (its second
		// choice, no change). A 4g.40gb created for big would satisfy
		// flex's first choice, and the scheduler would give it to flex.
		"a prioritized list served by a lower choice gets a device created later for its first choice": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "").build()},
			pods: []Pod{pod("flex", 1).priority(10).firstAvailable(1, "device.attributes['mig.miglayout.io'].memory >= 15000", profileIs("1g.10gb")).build(),
				pod("big", 5).claim(profileIs("4g.40gb"), 1).build()},
			served: []string{"default/flex"},
		},
		// flex, on n1 only, gets n1's free 1g.10gb as above. A 4g.40gb
		// for big on n1's empty GPU would go to flex; n2's empty GPU is
		// in the same state, and there flex is no rival.
		"a way refused on one node is taken on another node's GPU of the same state": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@6", "").gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{pod("flex", 1).priority(10).nodeSelector("kubernetes.io/hostname", "n1").
				firstAvailable(1, "device.attributes['mig.miglayout.io'].memory >= 15000", profileIs("1g.10gb")).build(),
				pod("big", 5).claim(profileIs("4g.40gb"), 1).build()},
			served: []string{"default/big", "default/flex"},
		},
		// flex1 and flex2 get the 1g.10gb their changes in flight bring
		// (n1, n2). mid's best way, the free 2g.20gb of n1's GPU 1, goes
		// to flex1, n1's first 2g.20gb in publication order; so does a
		// 2g.20gb on n2's empty GPU to flex2. n1's empty GPU, in the same
		// state as n2's, is another GPU: with a 2g.20gb there, flex1 takes
		// GPU 1's and mid gets its own. A refusal on n1 of one class's way
		// does not keep another class's way from n1.
		"a way refused on a node is still tried there for a GPU of another state": {
			nodes: []Node{node("n2").policy(Policy{MaxGPUsPerNode: 4}).gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/flex2").
				gpu("A100-SXM4-80GB", "", "").build(),
				node("n1").policy(Policy{MaxGPUsPerNode: 4}).gpu("A100-SXM4-80GB", "1g.10gb@6", "").changingFor("default/flex1").
					gpu("A100-SXM4-80GB", "2g.20gb@4", "").gpu("A100-SXM4-80GB", "", "").build()},
			pods: []Pod{pod("flex1", 1).priority(10).nodeSelector("kubernetes.io/hostname", "n1").
				firstAvailable(1, "device.attributes['mig.miglayout.io'].memory >= 15000", profileIs("1g.10gb")).build(),
				pod("flex2", 2).priority(10).nodeSelector("kubernetes.io/hostname", "n2").
					firstAvailable(1, "device.attributes['mig.miglayout.io'].memory >= 15000", profileIs("1g.10gb")).build(),
				pod("mid", 5).claim(profileIs("2g.20gb"), 1).build()},
			served: []string{"default/flex1", "default/flex2", "default/mid"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Nodes: tc.nodes, Pending: tc.pods, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.served, servedPods(res)); diff != "" {
				t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
			}
			for _, newestFirst := range []bool{false, true} {
				if failed := schedulerReplay(t, snap, res, newestFirst); len(failed) > 0 {
					t.Errorf("served by the plan, but the scheduler taking pods newest first=%t cannot allocate them: %v\nplan: %+v", newestFirst, failed, toTrace(res))
				}
			}
		})
	}
}
