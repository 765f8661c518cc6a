package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestFrozenNodeThatCarriesOnServesItsChangesPods: a pod whose device a
// change under way on a Frozen node brings is served there, and nothing
// else is changed for it, where the node's agent carries the change out
// (Node.CarriesOn: the MigLayout paused, the node in conflict or being
// handed over). Where it does not (the agent lost), the pod is planned on
// another node, and a Frozen node's free devices never serve a pod its
// changes are not for.
func TestFrozenNodeThatCarriesOnServesItsChangesPods(t *testing.T) {
	live := node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
	for name, tc := range map[string]struct {
		frozen *nodeB
		pod    *podB
		want   trace
	}{
		"paused: served by the change under way": {
			frozen: node("n1").frozenBy("its MigLayout a is paused (spec.paused)").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/p"),
			pod:    pod("p", 1).claim(profileIs("3g.40gb"), 1),
			want:   trace{Served: []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4"}},
		},
		"agent lost: planned elsewhere": {
			frozen: node("n1").frozenBy("its agent is lost").gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/p"),
			pod:    pod("p", 1).claim(profileIs("3g.40gb"), 1),
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"paused: the change's device no longer fits the pod": {
			frozen: node("n1").frozenBy("its MigLayout a is paused (spec.paused)").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/p"),
			pod:    pod("p", 1).claim(profileIs("1g.10gb"), 1),
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
		"paused: the node was cordoned since": {
			frozen: node("n1").frozenBy("its MigLayout a is paused (spec.paused)").carriesOn().cordoned().gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/p"),
			pod:    pod("p", 1).claim(profileIs("3g.40gb"), 1),
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"paused: free devices of the change serve no other pod": {
			frozen: node("n1").frozenBy("its MigLayout a is paused (spec.paused)").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/other"),
			pod:    pod("p", 1).claim(profileIs("3g.40gb"), 1),
			want: trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"paused: served by the change done": {
			frozen: node("n1").frozenBy("its MigLayout a is paused (spec.paused)").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@4", "").servesDone("default/p"),
			pod:    pod("p", 1).claim(profileIs("3g.40gb"), 1),
			want:   trace{Served: []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, []Node{tc.frozen.build(), live}, []Pod{tc.pod.build()}))
		})
	}
}

// TestFrozenNodeServesNoOtherPodOnceItsPodIsServed: a pod served on the
// devices of a Frozen node that carries on does not open the node's other
// free devices to the pods planned after it: q, of the same profile, is
// planned on n2.
func TestFrozenNodeServesNoOtherPodOnceItsPodIsServed(t *testing.T) {
	for name, frozen := range map[string]*nodeB{
		"change done":      node("n1").frozenBy("paused").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "").servesDone("default/p"),
		"change under way": node("n1").frozenBy("paused").carriesOn().gpu("A100-SXM4-80GB", "3g.40gb@0,3g.40gb@4", "").changingFor("default/p"),
	} {
		t.Run(name, func(t *testing.T) {
			live := node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
			p := pod("p", 2).claim(profileIs("3g.40gb"), 1).build()
			q := pod("q", 1).claim(profileIs("3g.40gb"), 1).build()
			want := trace{
				Changes: []string{"n2/0: 7g.80gb@0 -> 3g.40gb@4 serves default/q"},
				Served:  []string{"default/p -> n1 gpu-0-mig-3g40gb-9-0", "default/q -> n2 gpu-0-mig-3g40gb-9-4 after change"},
			}
			nodes := []Node{frozen.build(), live}
			checkTrace(t, want, planTrace(t, nodes, []Pod{p, q}))
			// Nor would any pod planned later: the frozen node's GPUs
			// are in no class and no free list.
			pl, err := NewPlanner(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: []Pod{p, q}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			for key, c := range pl.p.classes {
				for _, g := range c.gpus {
					if g.node.n.Frozen && g.cls == c {
						t.Errorf("class %s lists GPU %d of frozen node %s", key, g.g.Info.Index, g.node.n.Node.Name)
					}
				}
			}
			for prof, l := range pl.p.free {
				for _, g := range l.gpus {
					if g.node.n.Frozen {
						t.Errorf("free list of %s lists GPU %d of frozen node %s", prof, g.g.Info.Index, g.node.n.Node.Name)
					}
				}
			}
		})
	}
}
