package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodPlannedWhereItsRequestsFit: a pod that asks for more CPU than a
// node has allocatable at all is not planned there, where kube-scheduler
// would never bind it while the device made for it counted as serving it;
// a resource the node does not list counts as 0 there (DRA-backed extended
// resources are judged apart: TestDRABackedExtendedResourcePerNode).
func TestPodPlannedWhereItsRequestsFit(t *testing.T) {
	withCPU := func(n Node, cpu string) Node {
		n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Gi")}
		return n
	}
	tests := map[string]struct {
		requests corev1.ResourceList
		nodes    []Node
		want     trace
	}{
		"the node with the CPU": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")},
			nodes: []Node{
				withCPU(node("small").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"),
				withCPU(node("large").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "128"),
			},
			want: trace{
				Changes:    []string{"large/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:     []string{"default/p -> large gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		"no node with the CPU": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("256")},
			nodes:    []Node{withCPU(node("small").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8")},
			want:     trace{Unservable: map[string]string{"default/p": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"}},
		},
		// What the pods bound to a node request counts too (Node.Requested).
		"the node whose pods leave the CPU": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			nodes: []Node{
				requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "6", 3),
				requested(withCPU(node("quiet").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "4", 3),
			},
			want: trace{
				Changes:    []string{"quiet/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:     []string{"default/p -> quiet gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		"the node's pods leave too little CPU now": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			nodes:    []Node{requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "6", 3)},
			want:     trace{Unservable: map[string]string{"default/p": WaitsForNodeResources}},
		},
		"the node takes no more pods": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			nodes:    []Node{requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "1", 110)},
			want:     trace{Unservable: map[string]string{"default/p": WaitsForNodeResources}},
		},
		// No device plugin of the node serves it (kube-scheduler's
		// NodeResourcesFit: Insufficient example.com/fpga).
		"an extended resource the node does not list": {
			requests: corev1.ResourceList{"example.com/fpga": resource.MustParse("1")},
			nodes:    []Node{withCPU(node("small").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8")},
			want:     trace{Unservable: map[string]string{"default/p": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"}},
		},
		"a node that lists no allocatable (its kubelet has not reported)": {
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			nodes:    []Node{node("new").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()},
			want: trace{
				Changes:    []string{"new/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:     []string{"default/p -> new gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", 1).claim(profileIs("1g.10gb"), 1).build()
			p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: tc.requests}}}
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: tc.nodes, Pending: []Pod{p}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDRABackedExtendedResourcePerNode: a pod asking for nvidia.com/gpu,
// which a DeviceClass backs (its claim stands for it: Pod.ExtendedResources),
// is planned as kube-scheduler places it on each node: where the node lists
// the resource at 0 (the device plugin that served it is gone) or not at
// all, through a claim for a MIG device, the resource not judged against
// allocatable or room; where the node lists it above 0, its device plugin
// serves it and the scheduler makes no claim, so no GPU there is
// repartitioned for the pod.
func TestDRABackedExtendedResourcePerNode(t *testing.T) {
	changedOn := func(name string) trace {
		return trace{
			Changes:    []string{name + "/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
			Served:     []string{"default/p -> " + name + " gpu-0-mig-1g10gb-19-6 after change"},
			Unservable: map[string]string{},
		}
	}
	tests := map[string]struct {
		nodes []Node
		want  trace
	}{
		"listed at 0": {
			nodes: []Node{withPluginGPUs(node("migrated").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "0")},
			want:  changedOn("migrated"),
		},
		"not listed": {
			nodes: []Node{withPluginGPUs(node("dra").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "")},
			want:  changedOn("dra"),
		},
		"listed above 0 on one node": {
			nodes: []Node{
				withPluginGPUs(node("a-plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"),
				withPluginGPUs(node("b-dra").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "0"),
			},
			want: changedOn("b-dra"),
		},
		"listed above 0 on every node": {
			nodes: []Node{withPluginGPUs(node("plugin").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8")},
			want:  trace{Unservable: map[string]string{"default/p": ServedByDevicePlugin}},
		},
		// The device plugin is not why where the pod may not run there
		// anyway.
		"listed above 0 on a node whose taint the pod does not tolerate": {
			nodes: []Node{withPluginGPUs(node("plugin").taint("dedicated").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8")},
			want:  trace{Unservable: map[string]string{"default/p": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := asExtendedResource(pod("p", 1).claim(profileIs("1g.10gb"), 1).build())
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: tc.nodes, Pending: []Pod{p}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// requested sets what the pods bound to n request, all of priority 0: cpu,
// and their number (the node takes 110 pods).
func requested(n Node, cpu string, pods int64) Node {
	return requestedAt(n, 0, cpu, pods)
}

// requestedAt adds to what the pods bound to n request: pods of priority
// prio, cpu between them.
func requestedAt(n Node, prio int32, cpu string, pods int64) Node {
	n.Node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	n.Requested = append(n.Requested, PriorityRequests{Priority: prio,
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}})
	return n
}

// TestNodeRoom: what a node has left for a pending pod is its allocatable
// less what the bound pods it may not preempt request (those of its
// priority or higher; all of them for a pod whose preemptionPolicy is
// Never) and what the pods planned there before it request.
func TestNodeRoom(t *testing.T) {
	never := corev1.PreemptNever
	withCPU := func(n Node, cpu string) Node {
		n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Gi")}
		return n
	}
	p := func(name string, prio int32, cpu string, policy *corev1.PreemptionPolicy) Pod {
		b := pod(name, 1).claim(profileIs("1g.10gb"), 1).priority(prio).build()
		b.Pod.Spec.PreemptionPolicy = policy
		b.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		return b
	}
	// sharing gives the pod, instead of its claim, the claim "shared"
	// that the other pods sharing do too.
	sharing := func(pod Pod) Pod {
		b := &podB{p: pod}
		b.p.Claims, b.p.Pod.Spec.ResourceClaims = nil, nil
		return b.sharedClaim("shared", profileIs("1g.10gb")).build()
	}
	busyLow := func() Node {
		return requestedAt(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), 0, "8", 4)
	}
	tests := map[string]struct {
		nodes []Node
		pods  []Pod
		want  trace
	}{
		// kube-scheduler evicts lower-priority pods for it once its
		// device exists.
		"a pod that may preempt the node's pods": {
			nodes: []Node{busyLow()},
			pods:  []Pod{p("high", 1000, "2", nil)},
			want: trace{
				Changes:    []string{"busy/0: 7g.80gb@0 -> 1g.10gb@6 serves default/high"},
				Served:     []string{"default/high -> busy gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		"a pod that never preempts": {
			nodes: []Node{busyLow()},
			pods:  []Pod{p("high", 1000, "2", &never)},
			want:  trace{Unservable: map[string]string{"default/high": WaitsForNodeResources}},
		},
		"a pod of the same priority": {
			nodes: []Node{requestedAt(busyLow(), 1000, "0", 1)},
			pods:  []Pod{p("same", 0, "2", nil)},
			want:  trace{Unservable: map[string]string{"default/same": WaitsForNodeResources}},
		},
		"pods of higher priority hold the CPU": {
			nodes: []Node{requestedAt(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), 2000, "7", 1)},
			pods:  []Pod{p("high", 1000, "2", nil)},
			want:  trace{Unservable: map[string]string{"default/high": WaitsForNodeResources}},
		},
		// The first pod planned on a node takes its room from the next.
		"two pods, room for one": {
			nodes: []Node{
				requested(withCPU(node("a").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "2", 1),
				withCPU(node("b").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "64"),
			},
			pods: []Pod{p("p1", 0, "4", nil), p("p2", 0, "4", nil)},
			want: trace{
				Changes: []string{
					"a/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p1",
					"b/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p2",
				},
				Served: []string{
					"default/p1 -> a gpu-0-mig-1g10gb-19-6 after change",
					"default/p2 -> b gpu-0-mig-1g10gb-19-6 after change",
				},
				Unservable: map[string]string{},
			},
		},
		// A pod sharing a claim with a pod served on a node runs there
		// too, where its requests must fit beside that pod's.
		"a pod sharing a claim, no room beside its host": {
			nodes: []Node{requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "4", 2)},
			pods:  []Pod{sharing(p("a", 0, "2", nil)), sharing(p("b", 0, "5", nil))},
			want: trace{
				Changes:    []string{"busy/0: 7g.80gb@0 -> 1g.10gb@6 serves default/a"},
				Served:     []string{"default/a -> busy gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{"default/b": WaitsForNodeResources},
			},
		},
		"pods sharing a claim, room for both": {
			nodes: []Node{requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "1", 2)},
			pods:  []Pod{sharing(p("a", 0, "2", nil)), sharing(p("b", 0, "5", nil))},
			want: trace{
				Changes:    []string{"busy/0: 7g.80gb@0 -> 1g.10gb@6 serves default/a, default/b"},
				Served:     []string{"default/a -> busy gpu-0-mig-1g10gb-19-6 after change", "default/b -> busy gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
		// A request of zero is not judged, as kube-scheduler skips it.
		"a zero request on an overcommitted node": {
			nodes: []Node{requested(withCPU(node("busy").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8"), "9", 3)},
			pods:  []Pod{p("zero", 0, "0", nil)},
			want: trace{
				Changes:    []string{"busy/0: 7g.80gb@0 -> 1g.10gb@6 serves default/zero"},
				Served:     []string{"default/zero -> busy gpu-0-mig-1g10gb-19-6 after change"},
				Unservable: map[string]string{},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: tc.nodes, Pending: tc.pods})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
