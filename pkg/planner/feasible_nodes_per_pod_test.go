package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// TestFeasibleNodesJudgedForEachPod: a pod whose claims are allocated
// already on one node, or whose required node affinity names one node, is
// planned there, even after a pod without either was planned on another
// node.
func TestFeasibleNodesJudgedForEachPod(t *testing.T) {
	onN2 := pod("bound", 1).claim(profileIs("1g.10gb"), 1).build()
	onN2.Pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}}}}}}}
	tests := map[string]Pod{
		"a claim allocated already on n2": pod("bound", 1).claim(profileIs("1g.10gb"), 1).allocatedOn("n2").build(),
		"a required node affinity for n2": onN2,
	}
	for name, bound := range tests {
		t.Run(name, func(t *testing.T) {
			nodes := []Node{
				node("n1").gpu("A100-SXM4-80GB", "", "").build(),
				node("n2").gpu("A100-SXM4-80GB", "", "").build(),
			}
			snap := Snapshot{Driver: driver, Nodes: nodes, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Pending: []Pod{pod("free", 2).claim(profileIs("1g.10gb"), 1).build(), bound}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"default/free": "n1", "default/bound": "n2"}, servedNodes(res)); diff != "" {
				t.Errorf("nodes of the pods (-want +got):\n%s\nplan: %+v", diff, toTrace(res))
			}
		})
	}
}
