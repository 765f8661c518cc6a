package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// cpuNode is a node of one A100 (one free 7g.80gb) with cpu allocatable.
func cpuNode(name, cpu string) Node {
	n := node(name).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()
	n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Gi")}
	return n
}

// cpuPod is a pending pod of one 1g.10gb that requests cpu, of priority
// prio, never preempting where never is set.
func cpuPod(name string, prio int32, cpu string, never bool) Pod {
	p := pod(name, 1).claim(profileIs("1g.10gb"), 1).priority(prio).build()
	if never {
		policy := corev1.PreemptNever
		p.Pod.Spec.PreemptionPolicy = &policy
	}
	p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	return p
}

// TestNodeRoomOfSeveralPriorities: a pod that may preempt finds room
// beside all the bound pods of its priority or higher, summed over their
// levels, whatever order Node.Requested lists them in, while those of a
// lower priority do not count. Here 8 CPUs hold pods of priority 3000 (3
// CPUs), 0 (1 CPU) and 2000 (3 CPUs): a pod of priority 1000 has 2 CPUs
// left, not 5 (the lowest level only) nor 8 (none).
func TestNodeRoomOfSeveralPriorities(t *testing.T) {
	busy := func() Node {
		return requestedAt(requestedAt(requestedAt(cpuNode("busy", "8"), 3000, "3", 1), 0, "1", 1), 2000, "3", 1)
	}
	tests := map[string]struct {
		pod  Pod
		want trace
	}{
		"room for what the higher levels leave": {
			pod: cpuPod("fits", 1000, "2", false),
			want: trace{
				Changes:    []string{"busy/0: 7g.80gb@0 -> 1g.10gb@6 serves default/fits"},
				Served:     []string{"default/fits -> busy gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		"no room beyond it": {
			pod:  cpuPod("large", 1000, "3", false),
			want: trace{Unservable: map[string]string{"default/large": WaitsForNodeResources}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(t.Context(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: []Node{busy()}, Pending: []Pod{tc.pod}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeRoomForPodThatNeverPreemptsBesideNegativePriorities: bound pods
// of a negative priority still hold their room against a pod that never
// preempts, however small the pods of the plan are: 8 CPUs with pods of
// priority -10 holding 6 leave no room for a pod of priority 0 asking for
// 4 that never preempts.
func TestNodeRoomForPodThatNeverPreemptsBesideNegativePriorities(t *testing.T) {
	n := requestedAt(cpuNode("busy", "8"), -10, "6", 1)
	res, err := Plan(t.Context(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: []Node{n},
		Pending: []Pod{cpuPod("never", 0, "4", true)}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace{Unservable: map[string]string{"default/never": WaitsForNodeResources}}
	if diff := cmp.Diff(want, toTrace(res)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestNodeRoomForPodAddedLater: a pod added to a plan (Planner.Add) larger
// than any the plan started with is judged against the node's room like
// any other, not passed as one of the plan's small pods: 8 CPUs, 6 held by
// bound pods and 1 by the pod planned first, leave no room for one more
// asking for 4.
func TestNodeRoomForPodAddedLater(t *testing.T) {
	n := requested(cpuNode("busy", "8"), "6", 1)
	pl, err := NewPlanner(t.Context(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: []Node{n},
		Pending: []Pod{cpuPod("small", 0, "1", false)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Add(t.Context(), cpuPod("large", 0, "4", false)); err != nil {
		t.Fatal(err)
	}
	res := pl.Result()
	if diff := cmp.Diff([]string{"default/small"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
	}
	if got, want := res.Unservable["default/large"], WaitsForNodeResources; got != want {
		t.Errorf("pod added without room: reason %q, want %q", got, want)
	}
}

// TestRoomFitsPodThatNeverPreempts: Room judges a pod whose
// preemptionPolicy is Never against every bound pod, lower priorities
// included, as kube-scheduler would never evict them for it.
func TestRoomFitsPodThatNeverPreempts(t *testing.T) {
	never := cpuPod("never", 100, "2", true)
	n := Node{Node: &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}},
		Requested: []PriorityRequests{{Priority: 0, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}}}}
	q := RequestOf(never)
	if got := NewRoom(n).Takes(q, 5); got != 0 {
		t.Errorf("takes %d pods that never preempt beside 7 of 8 CPUs in use, want 0", got)
	}
	if NewRoom(n).Fits(q) {
		t.Errorf("fits a pod that never preempts beside 7 of 8 CPUs in use, want no room")
	}
}
