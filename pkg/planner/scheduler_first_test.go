package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestPlanOlderPodThatTakesALargerPodsDeviceFirst: kube-scheduler tries
// every pending pod, those the plan leaves waiting included, in its order
// (priority, then age), and gives a claim the first device it accepts. An
// older pod whose claim also accepts the device the plan makes for a
// larger, younger pod is planned first (schedulerFirst): left waiting, it
// would be given that device (a whole 7g.80gb for a claim of 4 GB or
// more) and the larger pod nothing. In every case the plan's served pods
// get their devices when every pending pod is taken in either order.
func TestPlanOlderPodThatTakesALargerPodsDeviceFirst(t *testing.T) {
	anyMIG := "device.attributes['mig.miglayout.io'].memory >= 4000"
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		"an older claim of any size is served before a younger 7g claim on the one GPU": {
			nodes: []Node{node("n1").gpu("H100-SXM5-80GB", "", "").build()},
			pods:  []Pod{pod("whole", 1).claim(profileIs("7g.80gb"), 1).build(), pod("small", 10).claim(anyMIG, 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/small"},
				Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
				Kept:    map[string]string{"default/whole": "n1/gpu-0 7g.80gb@0"},
			},
		},
		"an older claim of any size is served before a younger 3g claim beside a device in use": {
			nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0", "4g.40gb@0").build()},
			pods:  []Pod{pod("big", 1).claim(profileIs("3g.40gb"), 1).build(), pod("flex", 10).claim(anyMIG, 1).build()},
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0 -> 4g.40gb@0,1g.10gb@6 serves default/flex"},
				Served:  []string{"default/flex -> n1 gpu-0-mig-1g10gb-19-6 after change"},
				Kept:    map[string]string{"default/big": "n1/gpu-0 3g.40gb@4"},
			},
		},
		// With room for both, both are served, the larger pod where it
		// spoils the least.
		"with room for both the younger 7g claim still gets a GPU": {
			nodes: []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).gpu("H100-SXM5-80GB", "", "").gpu("H100-SXM5-80GB", "", "").build()},
			pods:  []Pod{pod("whole", 1).claim(profileIs("7g.80gb"), 1).build(), pod("small", 10).claim(anyMIG, 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/small", "n1/1: (empty) -> 7g.80gb@0 serves default/whole"},
				Served: []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change",
					"default/whole -> n1 gpu-1-mig-7g80gb-0-0 after change"},
			},
		},
		// An older claim for a 1g only cannot take a 7g: the larger pod
		// goes first.
		"an older claim of another profile only does not go first": {
			nodes: []Node{node("n1").gpu("H100-SXM5-80GB", "", "").build()},
			pods:  []Pod{pod("whole", 1).claim(profileIs("7g.80gb"), 1).build(), pod("small", 10).claim(profileIs("1g.10gb"), 1).build()},
			want: trace{
				Changes:    []string{"n1/0: (empty) -> 7g.80gb@0 serves default/whole"},
				Served:     []string{"default/whole -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		// kube-scheduler takes the higher priority first, whatever the
		// age.
		"an older claim of any size of lower priority does not go first": {
			nodes: []Node{node("n1").gpu("H100-SXM5-80GB", "", "").build()},
			pods:  []Pod{pod("whole", 1).priority(10).claim(profileIs("7g.80gb"), 1).build(), pod("small", 10).claim(anyMIG, 1).build()},
			want: trace{
				Changes:    []string{"n1/0: (empty) -> 7g.80gb@0 serves default/whole"},
				Served:     []string{"default/whole -> n1 gpu-0-mig-7g80gb-0-0 after change"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
		// Thieves of thieves: tiny (oldest, any size) would take mid's
		// 3g.40gb, mid (any device of 40 GB or more) whole's 7g.
		"the pods that take an earlier pod's device go before it too": {
			nodes: []Node{node("n1").gpu("H100-SXM5-80GB", "", "").build()},
			pods: []Pod{pod("whole", 1).claim(profileIs("7g.80gb"), 1).build(),
				pod("mid", 5).claim("device.attributes['mig.miglayout.io'].memory >= 40000", 1).build(),
				pod("tiny", 10).claim(anyMIG, 1).build()},
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@0,3g.40gb@4 serves default/tiny, default/mid"},
				Served: []string{"default/tiny -> n1 gpu-0-mig-1g10gb-19-0 after change",
					"default/mid -> n1 gpu-0-mig-3g40gb-9-4 after change"},
				Kept: map[string]string{"default/whole": "n1/gpu-0 7g.80gb@0"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0, Nodes: tc.nodes, Pending: tc.pods}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			checkTrace(t, tc.want, toTrace(res))
			for _, newestFirst := range []bool{false, true} {
				if failed := replayPending(t, snap, res, newestFirst, true); len(failed) > 0 {
					t.Errorf("newest first %t: kube-scheduler, taking every pending pod, cannot allocate %v where the plan serves them", newestFirst, failed)
				}
			}
		})
	}
}
