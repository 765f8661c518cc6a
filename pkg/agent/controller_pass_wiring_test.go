package agent

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestReadyzAfterAPassOfANodeWithNodeMigLayout: on a node a MigLayout
// manages, the agent is Ready once a pass has published the pool, as on a
// node without NodeMigLayout.
func TestReadyzAfterAPassOfANodeWithNodeMigLayout(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, _, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	if err := r.Readyz(nil); err == nil {
		t.Error("Ready before any pass published the pool")
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Readyz(nil); err != nil {
		t.Errorf("not Ready after a pass of the NodeMigLayout published the pool: %v", err)
	}
}

// TestReconcileWritesStatusOverItsOwnInFlightRow: a GPU Ready on its
// layout is changed behind the agent's back; the next pass shows it in
// flight and puts it back, while the cache still shows the status from
// before, equal to the pass's outcome. The pass reads the NodeMigLayout
// from the API server for its final status, so the GPU's row ends Ready,
// not left Repartitioning.
func TestReconcileWritesStatusOverItsOwnInFlightRow(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var stale v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &stale); err != nil {
		t.Fatal(err)
	}
	if err := g.mgr.DestroyMIGDevice(t.Context(), 0, mig.MustParseLayout("7g.80gb@0")[0]); err != nil {
		t.Fatal(err)
	}
	// The cache goes on showing the status of the first pass.
	r.Client = interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		nml, ok := obj.(*v1alpha1.NodeMigLayout)
		if !ok {
			return cl.Get(ctx, key, obj, opts...)
		}
		stale.DeepCopyInto(nml)
		return nil
	}})
	r.APIReader = c
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "7g.80gb@0")
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.GPUs) != 1 || got.Status.GPUs[0].Phase != v1alpha1.PhaseReady {
		t.Errorf("status %+v after the GPU was put back, want GPU 0 Ready", got.Status.GPUs)
	}
}
