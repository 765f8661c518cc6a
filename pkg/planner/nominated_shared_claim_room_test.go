package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNominatedPodWaitingForASharedClaimKeepsItsRoom: a pod nominated to a
// node that waits for a claim it shares with a pod served earlier in the
// plan keeps its requests there too: a pod of lower priority planned after
// it that does not fit beside it waits for room.
func TestNominatedPodWaitingForASharedClaimKeepsItsRoom(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").allocatableCPU("4").build()
	// host (a 1g.10gb shared, a 3g.40gb of its own) is planned first, as
	// the larger pod; waiting has a claim of its own besides the shared
	// one, so it waits for the shared claim's allocation.
	host := pod("host", 3).priority(10).sharedClaim("c", profileIs("1g.10gb")).claim(profileIs("3g.40gb"), 1).requestsCPU("1").build()
	waiting := pod("waiting", 2).priority(10).sharedClaim("c", profileIs("1g.10gb")).claim(profileIs("1g.10gb"), 1).requestsCPU("2").build()
	waiting.Pod.Status.NominatedNodeName = "n1"
	late := pod("late", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("2").build()
	got := planTrace(t, []Node{n}, []Pod{host, waiting, late})
	want := map[string]string{"default/waiting": WaitsForSharedClaim, "default/late": WaitsForNodeResources}
	if diff := cmp.Diff(want, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s\nplan: %+v", diff, got)
	}
}

// TestNominatedPodWaitingOnAKeptPlacementKeepsItsRoom: a pod nominated to
// a node that waits, with exactly the claims of a pod planned before it,
// on the placement kept for that pod keeps its requests there: a pod of
// lower priority planned after it that does not fit beside it waits for
// room.
func TestNominatedPodWaitingOnAKeptPlacementKeepsItsRoom(t *testing.T) {
	// The 1g.10gb in use keeps the only 4g.40gb placement from being made.
	n := node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").allocatableCPU("4").build()
	keeper := pod("keeper", 3).priority(10).sharedClaim("c", profileIs("4g.40gb")).requestsCPU("1").build()
	waiting := pod("waiting", 2).priority(10).sharedClaim("c", profileIs("4g.40gb")).requestsCPU("2").build()
	waiting.Pod.Status.NominatedNodeName = "n1"
	late := pod("late", 1).claim(profileIs("1g.10gb"), 1).requestsCPU("3").build()
	want := trace{
		Kept:       map[string]string{"default/keeper": "n1/gpu-0 4g.40gb@0", "default/waiting": "n1/gpu-0 4g.40gb@0"},
		Unservable: map[string]string{"default/late": WaitsForNodeResources},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, []Pod{keeper, waiting, late}))
}

// TestNominatedRoomIsKeptOnTheNominatedNode: the requests of a nominated
// pod the plan does not serve are kept on the node it is nominated to,
// not on another: a pod planned after it on another node fits there.
func TestNominatedRoomIsKeptOnTheNominatedNode(t *testing.T) {
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").allocatableCPU("4").build(),
		// Full: the nominated pod waits for room on its GPU.
		node("n2").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").allocatableCPU("4").build(),
	}
	nominated := pod("nominated", 2).priority(10).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).requestsCPU("4").build()
	nominated.Pod.Status.NominatedNodeName = "n2"
	late := pod("late", 1).nodeSelector("kubernetes.io/hostname", "n1").claim(profileIs("1g.10gb"), 1).requestsCPU("2").build()
	got := planTrace(t, nodes, []Pod{nominated, late})
	if diff := cmp.Diff(map[string]string{"default/nominated": NoRoom}, got.Unservable); diff != "" {
		t.Errorf("unservable (-want +got):\n%s\nplan: %+v", diff, got)
	}
	if len(got.Served) != 1 || !strings.HasPrefix(got.Served[0], "default/late -> n1 ") {
		t.Errorf("served %v, want default/late on n1", got.Served)
	}
}
