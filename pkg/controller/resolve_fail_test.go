package controller

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

// TestResolveLiveFailureKeepsRows: a Static maxNodesChanging pass whose
// live read of an unsure write fails keeps the MigLayout's node rows (the
// node counts as changing meanwhile); it must not write the status as if
// the MigLayout selected no node.
func TestResolveLiveFailureKeepsRows(t *testing.T) {
	c, _ := staleRolloutCluster(t)
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var before v1alpha1.MigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "a"}, &before); err != nil {
		t.Fatal(err)
	}
	if len(before.Status.Nodes) == 0 {
		t.Fatal("no node rows to keep: the test shows nothing")
	}
	// An earlier write was answered with a timeout.
	r.rollouts.expectUnsure("uid-a", "n2", []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}, r.now())
	r.APIReader = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("the API server is unavailable")
	}})
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Error("the pass hid the failed live read")
	}
	var after v1alpha1.MigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "a"}, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Status.Nodes) != len(before.Status.Nodes) {
		t.Errorf("rows %d after a failed live read, were %d; conditions now %+v", len(after.Status.Nodes), len(before.Status.Nodes), after.Status.Conditions)
	}
}
