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

// TestFailedPassKeepsRowsWithTheirOwnReason: passes that fail at NVML's
// first read, between passes that succeed, mark PassFailed only the GPUs
// waiting for a change with nothing else to say. A GPU Blocked on a device
// in use, one unreadable, and one on its layout under a spec written in
// another order keep their rows, and no event is recorded for them.
func TestFailedPassKeepsRowsWithTheirOwnReason(t *testing.T) {
	g := newRig(t, "3xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "7g.80gb@0")
	g.setup(t, 2, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached = sets.New("gpu-0-mig-3g40gb-9-0")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0"), spec(2, "3g.40gb@4,3g.40gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	rows := func() map[int32]v1alpha1.GPUStatus {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
			t.Fatal(err)
		}
		out := map[int32]v1alpha1.GPUStatus{}
		for _, st := range nml.Status.GPUs {
			out[st.Index] = st
		}
		return out
	}
	want := map[int32][2]string{
		0: {string(v1alpha1.PhaseBlocked), v1alpha1.ReasonDeviceInUse},
		1: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonGPUUnreadable},
		2: {string(v1alpha1.PhaseReady), v1alpha1.ReasonLayoutApplied},
	}
	check := func(what string) {
		t.Helper()
		for idx, st := range rows() {
			if w := want[idx]; string(st.Phase) != w[0] || st.Reason != w[1] {
				t.Errorf("%s: GPU %d %s/%s (%q), want %s/%s", what, idx, st.Phase, st.Reason, st.Message, w[0], w[1])
			}
		}
	}
	check("setup")
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	for cycle := 1; cycle <= 2; cycle++ {
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(t.Context(), req); err == nil {
			t.Fatal("the pass succeeded, though NVML's first read failed")
		}
		check("failed pass")
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		check("pass after")
	}
	var evs []string
	for len(rec.Events) > 0 {
		evs = append(evs, <-rec.Events)
	}
	if len(evs) != 0 {
		t.Errorf("events %q over failing and succeeding passes of GPUs that kept their state, want none", evs)
	}
}

// TestChangedStatusEndsWithItsSpec: a row that says its change was made
// (an earlier pass changed the GPU, then failed) stops saying so once the
// spec asks for another layout, even while passes keep failing.
func TestChangedStatusEndsWithItsSpec(t *testing.T) {
	f := newHalvesToWhole(t)
	f.g.inv.failRepublish = errors.New("the API server is unavailable")
	f.reconcileFails(t, "its republication failed")
	nml := f.nml(t)
	if !strings.HasPrefix(nml.Status.GPUs[0].Message, changedButFailed) {
		t.Fatalf("setup: GPU 0 %q, want it to say its change was made", nml.Status.GPUs[0].Message)
	}
	nml.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	nml.Generation++
	if err := f.c.Update(t.Context(), &nml); err != nil {
		t.Fatal(err)
	}
	if err := f.g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	f.reconcileFails(t, "NVML's first read failed")
	if st := f.nml(t).Status.GPUs[0]; strings.HasPrefix(st.Message, changedButFailed) || st.Reason != ReasonPassFailed {
		t.Errorf("GPU 0, spec now 3g.40gb@0,3g.40gb@4 (NVML holds %v): %s/%s (%q), want PassFailed not saying the change was made", f.g.layouts(t), st.Phase, st.Reason, st.Message)
	}
}
