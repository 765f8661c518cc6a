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

// TestFailedPassForgetsChangesPublishedSince: a change whose status write
// failed is forgotten once a later pass's status is written: the GPU,
// changed to another layout since, and whose spec is back on the first
// change's, says a pass that fails before showing it stopped before its
// change, not that its change was made (NVML holds the other layout).
func TestFailedPassForgetsChangesPublishedSince(t *testing.T) {
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
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(50)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	setSpec := func(layout string) {
		t.Helper()
		var cur v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, layout)}
		cur.Generation++
		if err := c.Update(t.Context(), &cur); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("setup: the pass succeeded, though its status write failed")
	}
	refuseReady = false
	if _, err := r.Reconcile(t.Context(), req); err != nil { // published: Ready on 7g.80gb@0
		t.Fatal(err)
	}
	setSpec("3g.40gb@0,3g.40gb@4")
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
	setSpec("7g.80gb@0")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though NVML's first read failed")
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if st := got.Status.GPUs[0]; st.Reason != ReasonPassFailed || strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("GPU 0 (NVML: 3g.40gb@0,3g.40gb@4) after the failed pass: %s/%s (%q), want PassFailed saying the pass stopped before its change", st.Phase, st.Reason, st.Message)
	}
}

// TestFailedPassesAlikeWriteNoStatus: a pass that fails as the one before
// did (NVML's first read), on a GPU whose row says so already, writes no
// status: the row is as it should be.
func TestFailedPassesAlikeWriteNoStatus(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	writes := 0
	c := nmlClient(t, nml, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		writes++
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(50)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for pass := range 2 {
		writes = 0
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(t.Context(), req); err == nil {
			t.Fatal("the pass succeeded, though NVML's first read failed")
		}
		if pass == 0 && writes == 0 {
			t.Fatal("premise: the first failed pass wrote no status")
		}
	}
	if writes != 0 {
		t.Errorf("the second failed pass wrote status %d times, want none (GPU 0's row says it already)", writes)
	}
}
