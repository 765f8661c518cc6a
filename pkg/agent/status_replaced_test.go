package agent

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStatusNotWrittenToANodeMigLayoutMadeAgain: a NodeMigLayout deleted
// and made again under the node's name during a pass gets neither the
// pass's outcome nor its in-flight rows: its observedGeneration would say
// the old spec's generation, and a controller would take its spec, which no
// pass has acted on, for done.
func TestStatusNotWrittenToANodeMigLayoutMadeAgain(t *testing.T) {
	// The in-flight row's write fails (the GPU gets no NVML work unless
	// shown Repartitioning); the pass's outcome is dropped.
	tests := map[string]struct {
		write   func(r *NodeReconciler, spec actedOn) error
		wantErr error
	}{
		"writeStatus": {write: func(r *NodeReconciler, spec actedOn) error {
			return r.writeStatus(t.Context(), spec, &SyncResult{}, false)
		}},
		"patchGPUPhase": {write: func(r *NodeReconciler, spec actedOn) error {
			return r.patchGPUPhase(t.Context(), spec, 0, GPUResult{Phase: v1alpha1.PhaseRepartitioning, Reason: v1alpha1.ReasonRepartitioning})
		}, wantErr: errNodeMigLayoutReplaced},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			made := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "made-again", Generation: 1}}
			c := nmlClient(t, made, interceptor.Funcs{})
			r := &NodeReconciler{Client: c, NodeName: "n1"}
			status := func() v1alpha1.NodeMigLayoutStatus {
				t.Helper()
				var got v1alpha1.NodeMigLayout
				if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &got); err != nil {
					t.Fatal(err)
				}
				return got.Status
			}
			if err := tc.write(r, actedOn{uid: "deleted", generation: 7}); !errors.Is(err, tc.wantErr) {
				t.Fatalf("write for the deleted NodeMigLayout: %v, want %v", err, tc.wantErr)
			}
			if st := status(); st.ObservedGeneration != 0 || len(st.GPUs) != 0 || len(st.Conditions) != 0 {
				t.Fatalf("status of the NodeMigLayout made again = %+v, want none from the deleted one's pass", st)
			}
			if err := tc.write(r, actedOn{uid: "made-again", generation: 1}); err != nil {
				t.Fatal(err)
			}
			if st := status(); len(st.Conditions) == 0 {
				t.Errorf("status of its own pass = %+v, want it written", st)
			}
		})
	}
}

// TestNoNVMLWorkForANodeMigLayoutMadeAgain: where the NodeMigLayout is
// deleted and made again (same spec) after the pass showed the GPU
// Draining, the GPU cannot be shown Repartitioning on the object the pass
// acted on: the pass does no NVML work on it (the new object's pass shows
// and does it), as where the report fails.
func TestNoNVMLWorkForANodeMigLayoutMadeAgain(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "first", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "3g.40gb@4")}}}
	remade := false
	c := nmlClient(t, nml, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
			return err
		}
		if remade || obj.(*v1alpha1.NodeMigLayout).Status.GPUs[0].Phase != v1alpha1.PhaseDraining {
			return nil
		}
		remade = true
		if err := c.Delete(ctx, obj); err != nil {
			return err
		}
		again := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "again", Generation: 1}, Spec: nml.Spec}
		return c.Create(ctx, again)
	}})
	g.r.Reread = LiveSpecs(c, "n1")
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(50)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if !remade {
		t.Fatal("premise: the GPU was never shown Draining")
	}
	g.wantLayouts(t, "7g.80gb@0")
	var again v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &again); err != nil {
		t.Fatal(err)
	}
	if len(again.Status.GPUs) != 0 || again.Status.ObservedGeneration != 0 {
		t.Errorf("status of the NodeMigLayout made again = %+v, want none from the first one's pass", again.Status)
	}
}
