package agent

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStatusListsAtMostSixteenGPUs: a NodeMigLayout edited by hand to name
// 18 GPUs a two-GPU node lacks still gets a status the API server takes
// (status.gpus holds at most 16): the node's GPUs first, then the first
// missing ones, and the rest named in Degraded.
func TestStatusListsAtMostSixteenGPUs(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}
	for i := range 18 {
		specs = append(specs, spec(int32(20+i), "7g.80gb@0"))
	}
	res, err := g.r.Sync(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if len(st.GPUs) != maxStatusGPUs {
		t.Fatalf("status lists %d GPUs, want %d", len(st.GPUs), maxStatusGPUs)
	}
	if st.GPUs[0].Index != 0 || st.GPUs[1].Index != 1 || st.GPUs[1].Phase != v1alpha1.PhaseReady {
		t.Errorf("first entries %+v, %+v: want the node's GPUs 0 and 1, Ready", st.GPUs[0], st.GPUs[1])
	}
	deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason == v1alpha1.ReasonNoProblems ||
		!strings.Contains(deg.Message, "not listed") || !strings.Contains(deg.Message, "gpu 36") || !strings.Contains(deg.Message, "gpu 37") {
		t.Errorf("Degraded %+v: want it True, naming gpus 36 and 37 as not listed", deg)
	}
}

// TestStatusListsAtMostSixteenOfANodesGPUs: on a node whose NVML counts
// more GPUs than status.gpus takes (MaxItems 16), the status lists the
// first 16 and names the rest in Degraded, instead of being refused by the
// API server at every write (the node would never report).
func TestStatusListsAtMostSixteenOfANodesGPUs(t *testing.T) {
	g := newRig(t, "18xA100-SXM4-80GB")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if len(st.GPUs) != maxStatusGPUs || st.GPUs[maxStatusGPUs-1].Index != maxStatusGPUs-1 {
		t.Errorf("status lists %d GPUs (last %d), want the first %d", len(st.GPUs), st.GPUs[len(st.GPUs)-1].Index, maxStatusGPUs)
	}
	deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if deg == nil || deg.Status != metav1.ConditionTrue || !strings.Contains(deg.Message, "gpu 16 (") || !strings.Contains(deg.Message, "gpu 17 (") {
		t.Errorf("Degraded %+v, want it to name GPUs 16 and 17", deg)
	}
}
