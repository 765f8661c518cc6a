package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestFailedPassSaysChangedOnlyOfGPUsItChanged: a pass drains two GPUs,
// changes GPU 0, finds GPU 1's device allocated at the live re-check (so
// leaves it as it is), and fails at the republication. GPU 0's row says
// its change was made; GPU 1's, shown in flight too, says the pass stopped
// before its change was done.
func TestFailedPassSaysChangedOnlyOfGPUsItChanged(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0,3g.40gb@4")
	g.alloc.live = sets.New("gpu-1-mig-3g40gb-9-0")
	g.inv.failRepublish = errors.New("the API server is unavailable")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though its republication failed")
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
		t.Fatal(err)
	}
	rows := map[int32]v1alpha1.GPUStatus{}
	for _, st := range nml.Status.GPUs {
		rows[st.Index] = st
	}
	if st := rows[0]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || !strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("GPU 0 %s/%s (%q), want Pending/%s saying its change was made", st.Phase, st.Reason, st.Message, ReasonPassFailed)
	}
	if st := rows[1]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("GPU 1 %s/%s (%q), want Pending/%s saying the pass stopped before its change", st.Phase, st.Reason, st.Message, ReasonPassFailed)
	}
}

// TestChangedStatusAfterAPassThatStoppedBefore: a pass fails at NVML's
// first read, so GPU 0's row says the pass stopped before its change; the
// next pass changes GPU 0 and fails at the republication. The row then
// says the change was made, not what the earlier pass said.
func TestChangedStatusAfterAPassThatStoppedBefore(t *testing.T) {
	f := newHalvesToWhole(t)
	if err := f.g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	f.reconcileFails(t, "NVML's first read failed")
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || strings.HasPrefix(st.Message, changedButFailed) {
		t.Fatalf("after the first pass GPU 0 %s/%s (%q), want Pending/%s saying the pass stopped before its change", st.Phase, st.Reason, st.Message, ReasonPassFailed)
	}
	f.g.inv.failRepublish = errors.New("the API server is unavailable")
	f.reconcileFails(t, "its republication failed")
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || !strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("after the second pass GPU 0 %s/%s (%q), want Pending/%s saying its change was made (NVML holds %v)", st.Phase, st.Reason, st.Message, ReasonPassFailed, f.g.layouts(t))
	}
}
