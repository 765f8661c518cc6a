package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestMaxNodesChanging: three nodes hold 7g.80gb and their MigLayout asks
// for two 3g.40gb with maxNodesChanging 1. One node at a time gets the new
// layout, in node name order; the others keep theirs, their rows Pending
// and saying they wait their turn, the MigLayout not Ready. Once the first
// node reports the new layout, the second gets it; a node Blocked on a
// device in use holds the rollout.
func TestMaxNodesChanging(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml}
	for _, n := range []string{"n1", "n2", "n3"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, "7g.80gb@0", "")).status(a100(0).layout("7g.80gb@0")).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	reconcile := func() (map[string]string, v1alpha1.MigLayout) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		specs := map[string]string{}
		for _, n := range []string{"n1", "n2", "n3"} {
			var nml v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
				t.Fatal(err)
			}
			specs[n] = nml.Spec.GPUs[0].Layout
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
			t.Fatal(err)
		}
		return specs, got
	}
	report := func(n string, st *gpuBuilder) {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		nml.Status.GPUs = inventory(st)
		if err := c.Status().Update(context.Background(), &nml); err != nil {
			t.Fatal(err)
		}
	}
	const halves, whole = "3g.40gb@0,3g.40gb@4", "7g.80gb@0"

	specs, got := reconcile()
	if diff := cmp.Diff(map[string]string{"n1": halves, "n2": whole, "n3": whole}, specs); diff != "" {
		t.Errorf("specs after the first pass (-want +got):\n%s", diff)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" {
			continue
		}
		if row.Phase != v1alpha1.PhasePending || !strings.Contains(row.Message, "waits its turn") {
			t.Errorf("row of held node %s: %s %q, want Pending, waits its turn", row.Node, row.Phase, row.Message)
		}
		if len(row.GPUs) != 1 || row.GPUs[0].Desired != halves || row.GPUs[0].Actual != whole {
			t.Errorf("row of held node %s: GPUs %+v, want desired %s, actual %s", row.Node, row.GPUs, halves, whole)
		}
	}
	if got.Status.ReadyNodes != 0 {
		t.Errorf("ready nodes %d, want 0 while the rollout goes on", got.Status.ReadyNodes)
	}

	// Passes while n1 changes give nobody else a turn.
	if specs, _ := reconcile(); specs["n2"] != whole || specs["n3"] != whole {
		t.Errorf("specs while n1 changes: %v, want n2 and n3 held", specs)
	}
	report("n1", a100(0).layout(halves))
	if specs, _ := reconcile(); specs["n2"] != halves || specs["n3"] != whole {
		t.Errorf("specs once n1 holds its layout: %v, want n2's turn", specs)
	}
	// n2 is Blocked (a device in use): n3 waits on.
	report("n2", a100(0).layout(whole).inUse(whole).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: 7g.80gb@0"))
	if specs, _ := reconcile(); specs["n3"] != whole {
		t.Errorf("specs while n2 is Blocked: %v, want n3 held", specs)
	}
	report("n2", a100(0).layout(halves))
	specs, got = reconcile()
	if specs["n3"] != halves {
		t.Errorf("specs once n2 holds its layout: %v, want n3's turn (rows %+v)", specs, got.Status.Nodes)
	}
	report("n3", a100(0).layout(halves))
	if _, got = reconcile(); got.Status.ReadyNodes != 3 {
		t.Errorf("ready nodes %d, want 3 at the end of the rollout (rows %+v)", got.Status.ReadyNodes, got.Status.Nodes)
	}
}
