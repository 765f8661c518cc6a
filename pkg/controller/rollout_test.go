package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	const halves, whole = halvesLayout, wholeLayout

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
	specs, got = reconcile()
	if specs["n3"] != whole {
		t.Errorf("specs while n2 is Blocked: %v, want n3 held", specs)
	}
	// n3's row says which node holds the turn, and why it lasts.
	for _, row := range got.Status.Nodes {
		if row.Node == "n3" && !strings.Contains(row.Message, "changing now: n2 (gpu 0 Blocked, DeviceInUse)") {
			t.Errorf("row of held node n3: %q, want it to name n2, Blocked, as holding the turn", row.Message)
		}
	}
	// n2 Failed (an NVML error): n3 waits on, and its row says so.
	report("n2", a100(0).layout(whole).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance: ERROR_UNKNOWN"))
	specs, got = reconcile()
	if specs["n3"] != whole {
		t.Errorf("specs while n2 is Failed: %v, want n3 held", specs)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n3" && !strings.Contains(row.Message, "changing now: n2 (gpu 0 Failed, NVMLError)") {
			t.Errorf("row of held node n3: %q, want it to name n2, Failed, as holding the turn", row.Message)
		}
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

const halvesLayout, wholeLayout = "3g.40gb@0,3g.40gb@4", "7g.80gb@0"

// specsAfterReconcile reconciles MigLayout a once and returns the layout of GPU 0 in
// each node's NodeMigLayout spec.
func specsAfterReconcile(t *testing.T, c client.Client, r *Reconciler, nodes ...string) map[string]string {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	specs := map[string]string{}
	for _, n := range nodes {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		specs[n] = nml.Spec.GPUs[0].Layout
	}
	return specs
}

// TestMaxNodesChangingCountsAdoptedChangingNode: the MigLayout was deleted
// with --cascade=orphan in the middle of a rollout and made again (bound 1).
// n1's NodeMigLayout, orphaned, is being repartitioned to halves; n2 holds
// its old layout. n1 is adopted and keeps changing, so it counts, and n2
// waits.
func TestMaxNodesChangingCountsAdoptedChangingNode(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	orphan := nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build()
	orphan.Spec.MigLayout = "a"
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), orphan,
		ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != wholeLayout {
		t.Errorf("specs %v: n2 given a new layout while adopted n1 is still repartitioning (maxNodesChanging 1)", specs)
	}
}

// TestMaxNodesChangingAdoptsUnstartedChangesOneAtATime: MigLayout a (no
// bound) gave n1-n3 a new layout their agents have not started on; the
// nodes are relabelled to b (maxNodesChanging 1), which takes them over.
// a's changes not started count for nothing: b's layout reaches one node,
// the others drop a's change and wait, held on the layout they hold.
func TestMaxNodesChangingAdoptsUnstartedChangesOneAtATime(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("sevenths").counts("1g.10gb", 7))
	b := staticMigLayout("b", "uid-b", "b")
	b.Spec.MaxNodesChanging = ptr.To[int32](1)
	const sevenths = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	objs := []client.Object{a, b}
	for _, n := range []string{"n1", "n2", "n3"} {
		objs = append(objs, node(n, map[string]string{"pool": "b"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, sevenths, "")).status(a100(0).layout(wholeLayout)).build(), a))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n1": halvesLayout, "n2": wholeLayout, "n3": wholeLayout}
	got := map[string]string{}
	for n := range want {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(context.Background(), types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(&nml, b) {
			t.Errorf("%s not taken over by b", n)
		}
		got[n] = nml.Spec.GPUs[0].Layout
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("specs after b takes the nodes over, maxNodesChanging 1 (-want +got):\n%s", diff)
	}
}

// TestMaxNodesChangingCountsConflictedChangingNode: n1, being repartitioned
// to a's layout, becomes selected by MigLayout b as well (a label added).
// a leaves it as it is (its spec stays and its agent carries on): it still
// counts, and n2 waits.
func TestMaxNodesChangingCountsConflictedChangingNode(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	b := staticMigLayout("b", "uid-b", "b")
	b.Spec.NodeSelector.MatchLabels = map[string]string{"extra": "b"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, b,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
			status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", "")).build(), ml),
		ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != wholeLayout {
		t.Fatalf("setup: %v", specs)
	}
	// n1 gets b's label: a and b both select it.
	n1 := node("n1", nil)
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, n1); err != nil {
		t.Fatal(err)
	}
	n1.Labels["extra"] = "b"
	if err := c.Update(context.Background(), n1); err != nil {
		t.Fatal(err)
	}
	var nml v1alpha1.NodeMigLayout
	_ = c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &nml)
	if nml.Spec.GPUs[0].Layout != halvesLayout || !strings.Contains(string(nml.Status.GPUs[0].Phase), "Repartitioning") {
		t.Fatalf("setup: n1 %+v", nml)
	}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != wholeLayout {
		t.Errorf("specs %v: n2 given a new layout while n1 (in conflict, its agent still repartitioning) changes (maxNodesChanging 1)", specs)
	}
}

// TestHeldNodeNotRepartitionedWhenRuleReverts: with maxNodesChanging 1 a
// change to halves reaches n1; n2 is held (row Pending, "waits its turn"),
// its spec and GPU untouched. The rule is put back to 7g.80gb before n2's
// turn: n2 is Ready again, never having been given another layout, and no
// Repartitioned event names it.
func TestHeldNodeNotRepartitionedWhenRuleReverts(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml}
	for _, n := range []string{"n1", "n2"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n1"] != halvesLayout || specs["n2"] != wholeLayout {
		t.Fatalf("setup: specs %v, want n1 halves, n2 held", specs)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	if err := c.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != wholeLayout {
		t.Fatalf("specs after the revert %v", specs)
	}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventRepartitioned) && strings.Contains(e, "node n2") {
			t.Errorf("event %q, yet n2 was only held back and never given another layout", e)
		}
	}
}

// TestMaxNodesChangingNewNodeAlreadyAtLayout: n0 is Blocked on a device in
// use (maxNodesChanging 1: it holds the one slot). n1 joins the pool: its
// NodeMigLayout was made with an empty spec and its agent reports GPU 0
// already holding the rule's layout, so writing its spec changes nothing on
// the node: n1 is not held (not Pending, "waits its turn", for as long as
// n0 is Blocked) but Ready.
func TestMaxNodesChangingNewNodeAlreadyAtLayout(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n0", map[string]string{"pool": "a"}), node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n0").spec(specGPU(0, halvesLayout, `rule "halves": profiles 3g.40gb:2`)).
			status(a100(0).layout(wholeLayout).inUse(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: 7g.80gb@0")).build(), ml),
		ownedBy(nodeMigLayout("n1").status(a100(0).layout(halvesLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	_, ctx := ktesting.NewTestContext(t)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" && (row.Phase != v1alpha1.PhaseReady || strings.Contains(row.Message, "waits its turn")) {
			t.Errorf("row of n1, whose GPU already holds %s: %s %q; want Ready, not held", halvesLayout, row.Phase, row.Message)
		}
	}
	if got.Status.ReadyNodes != 1 {
		t.Errorf("ready nodes %d, want 1 (n1 holds the desired layout)", got.Status.ReadyNodes)
	}
}

// TestMaxNodesChangingUnreadableGPU: maxNodesChanging 1, the rule asks for
// halves; n1 holds halves on GPU 0, and its GPU 1 fell off the bus
// (Failed/GPUUnreadable) or was taken out (Failed/GPUMissing); n2 is on the
// old layout. A GPU that waits for its replacement does not hold the
// rollout's only slot, so n2 gets the new layout, whether GPU 1 was never
// read (no product: no rule decides it, no spec lists it) or was read
// before it failed (the agent keeps its product, the spec names it). Its
// spec is kept as it is: a new layout written for it now would take no
// slot and be applied once it is back, beside the node that holds the
// slot.
func TestMaxNodesChangingUnreadableGPU(t *testing.T) {
	for _, reason := range []string{v1alpha1.ReasonGPUUnreadable, v1alpha1.ReasonGPUMissing} {
		t.Run(reason, func(t *testing.T) { testMaxNodesChangingHardwareGone(t, reason) })
	}
}

func testMaxNodesChangingHardwareGone(t *testing.T, reason string) {
	const rule = `rule "halves": profiles 3g.40gb:2`
	neverRead := v1alpha1.GPUStatus{Index: 1}
	readBefore := a100(1).layout(wholeLayout).build()
	tests := map[string]struct {
		gpu1     v1alpha1.GPUStatus
		spec     []v1alpha1.GPUSpec // n1's spec
		wantGPU1 string             // GPU 1's layout in n1's spec after ("": none)
	}{
		"never read, in no spec":         {neverRead, []v1alpha1.GPUSpec{specGPU(0, halvesLayout, rule)}, ""},
		"read before, spec at halves":    {readBefore, []v1alpha1.GPUSpec{specGPU(0, halvesLayout, rule), specGPU(1, halvesLayout, rule)}, halvesLayout},
		"read before, spec at the whole": {readBefore, []v1alpha1.GPUSpec{specGPU(0, halvesLayout, rule), specGPU(1, wholeLayout, "")}, wholeLayout},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.MaxNodesChanging = ptr.To[int32](1)
			unreadable := tc.gpu1
			unreadable.Phase, unreadable.Reason = v1alpha1.PhaseFailed, reason
			unreadable.Message = "NVML cannot read the GPU, so its devices are not published: ERROR_GPU_IS_LOST"
			n1 := ownedBy(nodeMigLayout("n1").spec(tc.spec...).status(a100(0).layout(halvesLayout)).build(), ml)
			n1.Status.GPUs = append(n1.Status.GPUs, unreadable)
			n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
				node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
			if specs := specsAfterReconcile(t, c, r, "n2"); specs["n2"] != halvesLayout {
				t.Errorf("n2 %q, want the slot and %s", specs["n2"], halvesLayout)
			}
			var got v1alpha1.NodeMigLayout
			if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &got); err != nil {
				t.Fatal(err)
			}
			gpu1 := ""
			if i := slices.IndexFunc(got.Spec.GPUs, func(g v1alpha1.GPUSpec) bool { return g.Index == 1 }); i >= 0 {
				gpu1 = got.Spec.GPUs[i].Layout
			}
			if gpu1 != tc.wantGPU1 {
				t.Errorf("n1's GPU 1 spec %q, want %q", gpu1, tc.wantGPU1)
			}
		})
	}
}

// TestMaxNodesChangingSkipsNodeWithLostAgent: with maxNodesChanging 1, the
// rule changes while n1's agent is lost (row Unknown, its Lease not renewed
// for an hour); n1 and n2 both hold the old layout. Nodes take slots in
// name order, but n1's agent cannot carry anything out: n1 is held (it gets
// the layout once its agent is back) and the slot goes to n2.
func TestMaxNodesChangingSkipsNodeWithLostAgent(t *testing.T) {
	ctx, c := lostN1(t, wholeLayout)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
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
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" && !strings.HasPrefix(row.Message, "gets its new layout once its agent is back") {
			t.Errorf("n1's row says %q; want it to wait for its agent, not its turn", row.Message)
		}
	}
}

// TestMaxNodesChangingDropsUnstartedChangeOfLostAgent: with
// maxNodesChanging 1, n1 was given halves but its agent died before it
// started (Ready on the whole GPU, its Lease not renewed for an hour). It
// cannot carry the change out: the change is dropped (n1 gets it again
// once its agent is back) and the only slot goes to n2, rather than n1
// holding it until its agent returns.
func TestMaxNodesChangingDropsUnstartedChangeOfLostAgent(t *testing.T) {
	_, c := lostN1(t, halvesLayout)
	if specs := specLayouts(t, c); specs["n1"] != wholeLayout || specs["n2"] != halvesLayout {
		t.Errorf("specs %v: want n1's unstarted change dropped (its agent is lost) and the only slot given to n2", specs)
	}
}

// lostN1 is MigLayout a (the rules ask for halves, maxNodesChanging 1)
// reconciled twice, selecting n1, whose agent is lost (its Lease not
// renewed for an hour, its row Unknown) and whose spec asks for n1Spec,
// and n2, whose agent renews; both GPUs hold the whole GPU, n2 is asked
// for it. It returns the test's context and the client.
func lostN1(t *testing.T, n1Spec string) (context.Context, client.Client) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	ml.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown, Message: "the node's agent has not renewed its heartbeat Lease"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}),
		agentLease("n1", now.Add(-time.Hour), 40), agentLease("n2", now, 40),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, n1Spec, "")).status(a100(0).layout(wholeLayout)).build(), ml),
		ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100),
		AgentLeases: renewingLeases(&now, agentLease("n2", now, 40))}
	for range 2 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, c
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

// TestRolloutCountsGPUDroppedMidChange: a rule narrowed (gpuIndices [0,1]
// to [0]) while n1's GPU 1 drains towards the old target drops GPU 1 from
// n1's spec; the agent stops that change where it is, and until it has,
// n1 still holds the rollout's one slot (n2 waits) and its row is not
// Ready.
func TestRolloutCountsGPUDroppedMidChange(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	ml.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2).indices(0, 1))
	why := `rule "halves": profiles 3g.40gb:2`
	n1 := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, why), specGPU(1, halvesLayout, why)).status(
		a100(0).layout(halvesLayout),
		a100(1).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "draining 7g.80gb@0")).build(), ml)
	n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, ""), specGPU(1, wholeLayout, "")).
		status(a100(0).layout(wholeLayout), a100(1).layout(wholeLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != wholeLayout {
		t.Fatalf("n2 given %s while n1 drains, want it held", specs["n2"])
	}
	var got v1alpha1.MigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2).indices(0))
	if err := c.Update(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	specsAfterReconcile(t, c, r, "n1", "n2")
	specs := specsAfterReconcile(t, c, r, "n1", "n2") // n1's spec write comes back
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	if len(nml.Spec.GPUs) != 1 {
		t.Fatalf("n1's spec %+v, want GPU 0 only", nml.Spec.GPUs)
	}
	if specs["n2"] != wholeLayout {
		t.Errorf("n2 given %s while n1's GPU 1 still drains: two nodes changing under maxNodesChanging 1", specs["n2"])
	}
	if err := c.Get(t.Context(), types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" && (row.Phase != v1alpha1.PhaseDraining || !strings.Contains(row.Message, "gpu 1: Draining: no longer in the spec")) {
			t.Errorf("n1's row %s %q, want Draining, saying GPU 1's change stops", row.Phase, row.Message)
		}
	}

	// The agent has stopped GPU 1's change: n2 gets the slot.
	nml.Status.GPUs[1].Phase, nml.Status.GPUs[1].Reason, nml.Status.GPUs[1].Message = v1alpha1.PhaseReady, "", ""
	if err := c.Status().Update(t.Context(), &nml); err != nil {
		t.Fatal(err)
	}
	if specs := specsAfterReconcile(t, c, r, "n1", "n2"); specs["n2"] != halvesLayout {
		t.Errorf("n2 given %s once n1's GPU 1 stopped, want %s", specs["n2"], halvesLayout)
	}
}

// TestRepartitioningGPUDroppedFromSpecIsChanging: a GPU whose entry left
// the spec while its agent repartitions it (NVML calls under way) still
// changes: the node holds a maxNodesChanging slot until the agent stops.
func TestRepartitioningGPUDroppedFromSpecIsChanging(t *testing.T) {
	for _, p := range []v1alpha1.GPUPhase{v1alpha1.PhaseDraining, v1alpha1.PhaseRepartitioning} {
		nml := nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0").phase(p, string(p), "")).build()
		if !changing(nml) {
			t.Errorf("%s GPU no longer in the spec: changing false, want true", p)
		}
	}
}
