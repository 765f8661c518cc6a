package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A node held back by maxNodesChanging, with no write of this controller
// unseen, does not cancel the pass's other look again: here, a node whose
// NodeMigLayout is being deleted.
func TestHeldNodeKeepsTheLookAgainForADeletion(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	changing := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(), ml)
	held := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
	going := ownedBy(nodeMigLayout("n3").build(), ml)
	going.Finalizers = []string{"example.com/hold"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, changing, held, going,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), node("n3", map[string]string{"pool": "a"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	if err := c.Delete(context.Background(), going); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > waitForDeletion {
		t.Errorf("requeue after %v, want within %v (n3's deletion)", res.RequeueAfter, waitForDeletion)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &nml); err != nil {
		t.Fatal(err)
	}
	if nml.Spec.GPUs[0].Layout != wholeLayout {
		t.Errorf("n2 -> %s, want it held on %s while n1 changes", nml.Spec.GPUs[0].Layout, wholeLayout)
	}
}
