package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestMaxNodesChangingIgnoresUnreadableGPUOutsideSpec: with
// maxNodesChanging 1, n1 holds the MigLayout's layout on the only GPU its
// agent ever read (GPU 0); its GPU 1 fell off the bus before it was read
// (Failed/GPUUnreadable, no product, so no rule decides it and no spec
// lists it). n1 has reached what its spec asks for and is not changing, so
// n2, still on the old layout, gets the new one: a GPU that waits for its
// replacement does not hold the rollout's only slot.
func TestMaxNodesChangingIgnoresUnreadableGPUOutsideSpec(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	unreadable := v1alpha1.GPUStatus{Index: 1, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable,
		Message: "NVML cannot read the GPU, so its devices are not published: ERROR_GPU_IS_LOST"}
	n1 := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves": profiles 3g.40gb:2`)).
		status(a100(0).layout(halvesLayout)).build(), ml)
	n1.Status.GPUs = append(n1.Status.GPUs, unreadable)
	n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != halvesLayout {
		t.Errorf("specs %v: want n2 given the new layout (maxNodesChanging 1, n1 holds its spec's layout; only its unreadable GPU 1, in no spec, is not Ready)", specs)
	}
}

// TestMaxNodesChangingSkipsNodeWithLostAgent: with maxNodesChanging 1, the
// rule changes while n1's agent is lost (row Unknown, its Lease not renewed
// for an hour); n1 and n2 both hold the old layout. Nodes take slots in
// name order, but n1's agent cannot carry anything out: n1 is held (it gets
// the layout once its agent is back) and the slot goes to n2.
func TestMaxNodesChangingSkipsNodeWithLostAgent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	ml.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown, Message: "the node's agent has not renewed its heartbeat Lease"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}),
		agentLease("n1", now.Add(-time.Hour), 40), agentLease("n2", now, 40),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml),
		ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100),
		AgentLeases: &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return now }}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	specs := map[string]string{}
	for _, n := range []string{"n1", "n2"} {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		specs[n] = nml.Spec.GPUs[0].Layout
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if specs["n2"] != halvesLayout {
		t.Errorf("specs %v: want the only slot (maxNodesChanging 1) given to n2, not to n1 whose agent is lost (rows %+v)", specs, got.Status.Nodes)
	}
}

// TestGatingMigLayouts: a NodeMigLayout's event wakes, besides its owner
// (Owns), every other MigLayout with maxNodesChanging that selects its node
// (in conflict with the owner), since that MigLayout counts the node while
// it changes: once the node is done, a node it held back gets its layout
// without waiting for an unrelated event.
func TestGatingMigLayouts(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	owner := staticMigLayout("owner", "uid-owner", "a")
	owner.Spec.MaxNodesChanging = ptr.To[int32](1)
	gated := staticMigLayout("gated", "uid-gated", "a")
	gated.Spec.MaxNodesChanging = ptr.To[int32](1)
	unbounded := staticMigLayout("unbounded", "uid-unbounded", "a")
	elsewhere := staticMigLayout("elsewhere", "uid-elsewhere", "b")
	elsewhere.Spec.MaxNodesChanging = ptr.To[int32](1)
	n1 := ownedBy(nodeMigLayout("n1").build(), owner)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(owner, gated, unbounded, elsewhere, node("n1", map[string]string{"pool": "a"}), n1).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme()}
	var got []string
	for _, req := range r.gatingMigLayouts(ctx, n1) {
		got = append(got, req.Name)
	}
	if diff := cmp.Diff([]string{"gated"}, got); diff != "" {
		t.Errorf("MigLayouts woken by n1's NodeMigLayout (-want +got):\n%s", diff)
	}
	// A node deleted meanwhile wakes none.
	orphan := ownedBy(nodeMigLayout("gone").build(), owner)
	if reqs := r.gatingMigLayouts(ctx, orphan); len(reqs) != 0 {
		t.Errorf("a NodeMigLayout of a node that is gone woke %v", reqs)
	}
}
