package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestRolloutSpecWriteErrorExpectation: under maxNodesChanging, a spec
// write answered with an error that may have come after it was applied (a
// timeout, no answer) is expected as written until a live read settles it
// (writeMayHaveApplied); one the API server refused before applying
// anything (forbidden, a conflict) is not expected at all, nor is one that
// gives the node no other layouts (n1: only its annotation added).
func TestRolloutSpecWriteErrorExpectation(t *testing.T) {
	gr := schema.GroupResource{Group: "miglayout.io", Resource: "nodemiglayouts"}
	tests := map[string]struct {
		err  error
		want []string // the nodes whose write is expected unsure
	}{
		"timeout":        {err: apierrors.NewTimeoutError("the server was slow", 1), want: []string{"n2"}},
		"no answer":      {err: errors.New("connection reset by peer"), want: []string{"n2"}},
		"forbidden":      {err: apierrors.NewForbidden(gr, "n2", errors.New("denied by a webhook"))},
		"conflict":       {err: apierrors.NewConflict(gr, "n2", errors.New("the object has been modified"))},
		"invalid":        {err: apierrors.NewBadRequest("spec.gpus: invalid")},
		"too many asked": {err: apierrors.NewTooManyRequests("slow down", 1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := staleRolloutCluster(t)
			failing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return tc.err
				},
			})
			r := &Reconciler{Client: failing, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err == nil {
				t.Fatal("the pass hid the failed write of n2's spec")
			}
			var got []string
			for n := range r.rollouts.unsure("uid-a") {
				got = append(got, n)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes expected unsure (-want +got):\n%s", diff)
			}
		})
	}
}
