package agent

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestStatusNotWrittenToANodeMigLayoutMadeAgain: a NodeMigLayout deleted
// and made again under the node's name during a pass gets neither the
// pass's outcome nor its in-flight rows: its observedGeneration would say
// the old spec's generation, and a controller would take its spec, which no
// pass has acted on, for done.
func TestStatusNotWrittenToANodeMigLayoutMadeAgain(t *testing.T) {
	write := map[string]func(r *NodeReconciler, spec actedOn) error{
		"writeStatus": func(r *NodeReconciler, spec actedOn) error {
			return r.writeStatus(t.Context(), spec, &SyncResult{}, false)
		},
		"patchGPUPhase": func(r *NodeReconciler, spec actedOn) error {
			return r.patchGPUPhase(t.Context(), spec, 0, GPUResult{Phase: v1alpha1.PhaseDraining, Reason: v1alpha1.ReasonDraining})
		},
	}
	for name, write := range write {
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
			if err := write(r, actedOn{uid: "deleted", generation: 7}); err != nil {
				t.Fatal(err)
			}
			if st := status(); st.ObservedGeneration != 0 || len(st.GPUs) != 0 || len(st.Conditions) != 0 {
				t.Fatalf("status of the NodeMigLayout made again = %+v, want none from the deleted one's pass", st)
			}
			if err := write(r, actedOn{uid: "made-again", generation: 1}); err != nil {
				t.Fatal(err)
			}
			if st := status(); len(st.Conditions) == 0 {
				t.Errorf("status of its own pass = %+v, want it written", st)
			}
		})
	}
}
