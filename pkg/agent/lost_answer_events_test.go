package agent

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEventsToldOnceAfterAWriteWhoseAnswerWasLost: a status write the API
// server commits but whose answer is lost (a timeout) is not taken for the
// latest: the next passes read the server's status, which says Ready, and
// tell nothing more. (Remembering the in-flight row written before it,
// they would find the status as they would write it, write nothing, and
// tell Repartitioned on every pass.)
func TestEventsToldOnceAfterAWriteWhoseAnswerWasLost(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	nml := wholeAskedHalves()
	writes := 0
	lose := true
	c := nmlClient(t, nml, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			writes++
			n := obj.(*v1alpha1.NodeMigLayout)
			if err == nil && lose && n.Status.ObservedGeneration == 2 && n.Status.GPUs[0].Phase == v1alpha1.PhaseReady {
				lose = false
				return errors.New("the server was unable to return a response in the time allotted")
			}
			return err
		},
	})
	rec := events.NewFakeRecorder(50)
	r := &NodeReconciler{Client: c, APIReader: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for i := range 4 {
		_, err := r.Reconcile(t.Context(), req)
		got := eventReasons(rec)
		t.Logf("pass %d: err=%v events=%v writes=%d", i+1, err, got, writes)
		if i >= 2 && len(got) > 0 {
			t.Errorf("pass %d told %v again: the GPU was repartitioned once (status on the server has said Ready since pass 1)", i+1, got)
		}
	}
}
