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
// resources a node does not list (a DRA-backed extended resource) are not
// judged.
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
		"a resource the node does not list": {
			requests: corev1.ResourceList{"example.com/fpga": resource.MustParse("1")},
			nodes:    []Node{withCPU(node("small").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build(), "8")},
			want: trace{
				Changes:    []string{"small/0: 7g.80gb@0 -> 1g.10gb@6 serves default/p"},
				Served:     []string{"default/p -> small gpu-0-mig-1g10gb-19-6 after change"},
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

// requested sets what the pods bound to n request: cpu, and their number
// (the node takes 110 pods).
func requested(n Node, cpu string, pods int64) Node {
	n.Node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	n.Requested = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	return n
}
