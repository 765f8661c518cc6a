package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestFailedPassAfterLostStatusWriteSaysTheChangeWasMade: a pass that
// changes a GPU but cannot write its outcome (the status write fails)
// leaves the row Repartitioning, as do passes after it with nothing left
// to change whose status writes fail too; where a pass then fails before
// showing the GPU (NVML's first read), the row says the change was made,
// as NVML holds it, not that the pass stopped before it. A pass that
// succeeds then shows the GPU Ready.
func TestFailedPassAfterLostStatusWriteSaysTheChangeWasMade(t *testing.T) {
	for name, lostWrites := range map[string]int{
		"the pass that changed it":       1,
		"and one with nothing to change": 2,
	} {
		t.Run(name, func(t *testing.T) { failedPassAfterLostStatusWrites(t, lostWrites) })
	}
}

// failedPassAfterLostStatusWrites runs lostWrites passes whose status
// writes fail, the first of which changes GPU 0, then a failed pass and a
// pass that succeeds.
func failedPassAfterLostStatusWrites(t *testing.T, lostWrites int) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	refuseReady := true
	c := nmlClient(t, nml, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		for _, st := range obj.(*v1alpha1.NodeMigLayout).Status.GPUs {
			if refuseReady && st.Phase == v1alpha1.PhaseReady {
				return errors.New("the API server is unavailable")
			}
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(20)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	row := func() v1alpha1.GPUStatus {
		t.Helper()
		var got v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.GPUs) != 1 {
			t.Fatalf("status rows %+v, want GPU 0's", got.Status.GPUs)
		}
		return got.Status.GPUs[0]
	}
	for pass := 1; pass <= lostWrites; pass++ {
		if _, err := r.Reconcile(t.Context(), req); err == nil {
			t.Fatalf("pass %d succeeded, though its status write failed", pass)
		}
		if st, held := row(), g.layouts(t); st.Phase != v1alpha1.PhaseRepartitioning || held[0] != "7g.80gb@0" {
			t.Fatalf("setup, pass %d: GPU 0 %s (NVML %v), want Repartitioning with 7g.80gb@0 made", pass, st.Phase, held)
		}
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though NVML's first read failed")
	}
	if st := row(); st.Reason != ReasonPassFailed || !strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("GPU 0 after the failed pass: %s/%s (%q), want PassFailed saying its change was made", st.Phase, st.Reason, st.Message)
	}
	refuseReady = false
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if st := row(); st.Phase != v1alpha1.PhaseReady || st.Layout != "7g.80gb@0" {
		t.Errorf("GPU 0 after a pass that succeeds: %s %q, want Ready on 7g.80gb@0", st.Phase, st.Layout)
	}
}
