package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestBuildStatusOfGPUsNVMLDoesNotShow: a GPU the pass did not see keeps
// what identified it when last read, and whether it can run MIG (a rule
// for every MIG GPU would otherwise take a lost L4 for an unknown model of
// one). One NVML no longer counts (GPUMissing)
// says which GPU it was and how to forget it; one NVML cannot read
// (GPUUnreadable) keeps its message as it is; and a row that never named
// a GPU (shown in flight before any status was written) tells of none. A
// Ready result of a GPU the pass did not see gets no row.
func TestBuildStatusOfGPUsNVMLDoesNotShow(t *testing.T) {
	then := metav1.Now()
	attrs := &v1alpha1.GPUAttributes{PCIBusID: "0000:07:00.0"}
	old := v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-a", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Attributes: attrs, MIGCapable: ptr.To(true), Phase: v1alpha1.PhaseReady, LastTransitionTime: &then},
		{Index: 1, UUID: "GPU-b", Product: "NVIDIA L4", Attributes: attrs, MIGCapable: ptr.To(false), Phase: v1alpha1.PhaseReady, LastTransitionTime: &then},
		{Index: 2, Phase: v1alpha1.PhaseDraining, LastTransitionTime: &then},
	}}
	res := &SyncResult{Results: map[int]GPUResult{
		0: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 0"},
		1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: "NVML cannot read the GPU"},
		2: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 2"},
		3: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied},
	}}
	now := metav1.Now()
	st := BuildStatus(old, 2, res, now)
	want := []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-a", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Attributes: attrs, MIGCapable: ptr.To(true),
			Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, LastTransitionTime: &now,
			Message: "the node has no GPU with index 0 (it was GPU-a; to forget it, delete this NodeMigLayout: it is made again with the GPUs NVML shows)"},
		{Index: 1, UUID: "GPU-b", Product: "NVIDIA L4", Attributes: attrs, MIGCapable: ptr.To(false),
			Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, LastTransitionTime: &now,
			Message: "NVML cannot read the GPU"},
		{Index: 2, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, LastTransitionTime: &now,
			Message: "the node has no GPU with index 2"},
	}
	if diff := cmp.Diff(want, st.GPUs); diff != "" {
		t.Errorf("GPU statuses (-want +got):\n%s", diff)
	}
}
