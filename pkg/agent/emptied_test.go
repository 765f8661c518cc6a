package agent

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestEmptiedGPUToldOnTheNode: the pass after a restart that turns MIG mode
// off on a GPU the agent's killed work had emptied, or leaves it on as the
// change waits for a reset, says so in an event on the Node, since the GPU
// is in no spec and has no status row: with a NodeMigLayout asking nothing
// of the GPU, and with none at all.
func TestEmptiedGPUToldOnTheNode(t *testing.T) {
	cases := map[string]struct {
		noReset bool // an A100 whose board cannot reset it
		noNML   bool
		// failFirst: the first pass's republication fails, after the
		// mode change.
		failFirst bool
		// cancelFails: cancelling the pending change to MIG mode off
		// fails (it stays pending: nothing to tell but the failure).
		cancelFails bool
		want        []string
		wantMIGOn   bool
	}{
		"NodeMigLayout without the GPU":        {want: []string{EventMIGModeTurnedOff}},
		"no NodeMigLayout":                     {noNML: true, want: []string{EventMIGModeTurnedOff}},
		"the pass fails after the mode change": {failFirst: true, want: []string{EventMIGModeTurnedOff}},
		"the pass fails after the mode change, no NodeMigLayout": {failFirst: true, noNML: true,
			want: []string{EventMIGModeTurnedOff}},
		"turning MIG mode off waits for a reset": {noReset: true,
			want: []string{EventEmptiedGPUInMIGMode}, wantMIGOn: true},
		"cancelling the change waiting for a reset fails": {noReset: true, cancelFails: true, wantMIGOn: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := emptiedA100(t, c.noReset)
			g.restart(t)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
			var c2 client.Client
			if c.noNML {
				c2 = fake.NewClientBuilder().WithScheme(nmlScheme(t)).WithObjects(node).Build()
			} else {
				nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1}}
				c2 = nmlClient(t, nml, interceptor.Funcs{})
				if err := c2.Create(t.Context(), node); err != nil {
					t.Fatal(err)
				}
			}
			if c.cancelFails {
				if err := g.sim.InjectFault(nvmlsim.Fault{Op: "SetMigMode", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
					t.Fatal(err)
				}
			}
			rec := events.NewFakeRecorder(20)
			r := &NodeReconciler{Client: c2, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
			if c.failFirst {
				g.inv.failRepublish = errors.New("the API server is down")
				if _, err := r.Reconcile(t.Context(), req); err == nil {
					t.Fatal("the first pass did not fail")
				}
				g.inv.failRepublish = nil
			}
			for range 2 {
				if _, err := r.Reconcile(t.Context(), req); err != nil && !c.cancelFails {
					t.Fatal(err)
				}
			}
			var reasons []string
			for _, reason := range eventReasons(rec) {
				if reason != EventPassFailed {
					reasons = append(reasons, reason)
				}
			}
			if diff := cmp.Diff(c.want, reasons); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if st := g.sim.Snapshot().GPUs[0]; st.MIGCurrent != c.wantMIGOn {
				t.Errorf("MIG mode on %v, want %v", st.MIGCurrent, c.wantMIGOn)
			}
		})
	}
}
