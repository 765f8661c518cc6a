package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestDegradedReasonOfGPUsTheStatusCannotList: where every GPU the status
// lists is Ready and only GPUs past the 16 it lists degrade the node, the
// Degraded reason is that of the first GPU left out: UnknownGPU for a GPU
// NVML shows (neither the controller nor the Auto planner manages it), the
// result's reason for a GPU of the spec NVML does not show.
func TestDegradedReasonOfGPUsTheStatusCannotList(t *testing.T) {
	nodeOf := func(n int) *SyncResult {
		res := &SyncResult{Results: map[int]GPUResult{}}
		for i := range n {
			res.GPUs = append(res.GPUs, GPUState{GPU: gpu.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i))}})
			res.Results[i] = GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
		}
		return res
	}
	seventeen := nodeOf(maxStatusGPUs + 1)
	delete(seventeen.Results, maxStatusGPUs)
	missing := nodeOf(maxStatusGPUs)
	missing.Results[30] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 30"}
	for name, tc := range map[string]struct {
		res  *SyncResult
		want string
	}{
		"a seventeenth GPU NVML shows":                       {res: seventeen, want: v1alpha1.ReasonUnknownGPU},
		"a GPU of the spec NVML does not show, past sixteen": {res: missing, want: v1alpha1.ReasonGPUMissing},
	} {
		t.Run(name, func(t *testing.T) {
			st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, tc.res, metav1.Now())
			deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
			if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != tc.want {
				t.Errorf("Degraded %+v, want it True with reason %s", deg, tc.want)
			}
		})
	}
}
