package agent

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestStatusOfIndexLeftByRenumbering: an A100 and two H100s; after a
// reboot the A100 is not found and the H100s are numbered 0 and 1. The row
// of index 2, which NVML no longer counts, does not take the UUID of the
// H100 it showed before (now gpu 1: two rows would name one GPU, and its
// message would offer to forget a GPU that is there); it says where that
// GPU is and which GPU NVML shows nowhere, and keeps what the index held
// (its product: the controller keeps the index's spec entry, and the loss
// shows, Degraded), pass after pass.
func TestStatusOfIndexLeftByRenumbering(t *testing.T) {
	old := v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-a100", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Phase: v1alpha1.PhaseReady},
		{Index: 1, UUID: "GPU-h1", Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", Phase: v1alpha1.PhaseReady},
		{Index: 2, UUID: "GPU-h2", Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", Phase: v1alpha1.PhaseReady},
	}}
	res := &SyncResult{
		GPUs: []GPUState{
			{GPU: gpu.GPU{Index: 0, UUID: "GPU-h1", ProductName: "NVIDIA H100 80GB HBM3", MIGCapable: true}},
			{GPU: gpu.GPU{Index: 1, UUID: "GPU-h2", ProductName: "NVIDIA H100 80GB HBM3", MIGCapable: true}},
		},
		Results: map[int]GPUResult{2: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 2"}},
	}
	st := old
	for pass := range 2 {
		st = BuildStatus(st, 2, res, metav1.Now())
		var row *v1alpha1.GPUStatus
		for i := range st.GPUs {
			if st.GPUs[i].Index == 2 {
				row = &st.GPUs[i]
			}
		}
		if row == nil {
			t.Fatalf("pass %d: no row of index 2 in %+v", pass, st.GPUs)
		}
		if row.UUID != "" || row.Product != "NVIDIA H100 80GB HBM3" || row.Model != "H100-SXM5-80GB" {
			t.Errorf("pass %d: row 2 is of %q (%s, %s), want no UUID (GPU-h2 is gpu 1) and the index's product and model", pass, row.UUID, row.Product, row.Model)
		}
		for _, want := range []string{"GPU-h2, here before, is gpu 1 now", "not seen any more: GPU-a100 (NVIDIA A100-SXM4-80GB)"} {
			if !strings.Contains(row.Message, want) {
				t.Errorf("pass %d: row 2's message %q does not say %q", pass, row.Message, want)
			}
		}
	}
}

// TestNotSeenLeavesOutUnreadableGPUs: a GPU NVML counts but cannot read
// is not among those it shows nowhere.
func TestNotSeenLeavesOutUnreadableGPUs(t *testing.T) {
	prev := map[int32]v1alpha1.GPUStatus{
		0: {Index: 0, UUID: "GPU-b", Product: "NVIDIA A100-SXM4-80GB"},
		1: {Index: 1, UUID: "GPU-a", Product: "NVIDIA A100-SXM4-80GB"},
	}
	got := notSeen(prev, map[string]int{}, map[int]GPUResult{0: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable}})
	if got != "; not seen any more: GPU-a (NVIDIA A100-SXM4-80GB)" {
		t.Errorf("notSeen = %q, want GPU-a only (GPU-b is counted, unreadable)", got)
	}
}
