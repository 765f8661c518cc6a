package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// TestPreferNoScheduleTaintLeavesTheNodeFeasible: only NoSchedule and
// NoExecute taints a pod does not tolerate keep it off a node, as for
// kube-scheduler; a PreferNoSchedule taint does not.
func TestPreferNoScheduleTaintLeavesTheNodeFeasible(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.Node.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Nodes: []Node{n},
		Pending: []Pod{pod("p", 1).claim(profileIs("7g.80gb"), 1).build()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/p"}, servedPods(res)); diff != "" {
		t.Errorf("served pods (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
	}
}
