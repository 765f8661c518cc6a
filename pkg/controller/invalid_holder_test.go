package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestInvalidSelectorKeepsItsNodes: MigLayouts a and b both select n1, which
// b's NodeMigLayout holds at 7g.80gb. b's selector then stops parsing (a
// label key with a space, which admission cannot check). b cannot say which
// nodes it selects, so it releases none; a must not take n1 over and give it
// its halves: n1 stays b's, as it is, and a's row says why.
func TestInvalidSelectorKeepsItsNodes(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	held := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), b)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), held).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if specs := specsAfterReconcile(t, c, r, "n1"); specs["n1"] != wholeLayout {
		t.Errorf("n1 given %q, want it left at %q while b, whose selector is invalid, holds it", specs["n1"], wholeLayout)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(&nml); owner == nil || owner.UID != b.UID {
		t.Errorf("n1's NodeMigLayout controlled by %+v, want b", owner)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Nodes) != 1 || !strings.Contains(got.Status.Nodes[0].Message, `held by MigLayout "b", whose node selector is invalid`) {
		t.Errorf("a's node rows %+v, want n1's to say b holds it with an invalid selector", got.Status.Nodes)
	}
}

// TestInvalidSelectorBeingDeletedHoldsNothing: b, whose selector does not
// parse, holds n1 until it is deleted: once its deletion has begun (a
// finalizer still waits), n1 is no longer held from a, which may take it.
func TestInvalidSelectorBeingDeletedHoldsNothing(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	held := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), b)
	nmls := map[string]*v1alpha1.NodeMigLayout{"n1": held}
	sel := Selection{Nodes: []string{"n1"}}
	if got := HeldByInvalidSelectors(a, sel, []v1alpha1.MigLayout{*a, *b}, nmls); !got.Conflicted("n1") || !got.InvalidHolders["b"] {
		t.Fatalf("b not deleted: selection %+v, want n1 held by b", got)
	}
	b.DeletionTimestamp = &metav1.Time{Time: h0()}
	b.Finalizers = []string{"example.com/keep"}
	if got := HeldByInvalidSelectors(a, sel, []v1alpha1.MigLayout{*a, *b}, nmls); got.Conflicted("n1") || len(got.InvalidHolders) != 0 {
		t.Errorf("b being deleted: selection %+v, want n1 held by nobody", got)
	}
}

// TestInvalidSelectorHolderReportsTheConflict: b, whose selector does not
// parse, holds n1, which a selects: both report Conflict, each naming the
// other (a also says b's selector is invalid), and b says a selects n1.
func TestInvalidSelectorHolderReportsTheConflict(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	held := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), b)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), held).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	for name, want := range map[string]string{
		"a": `MigLayout "b", whose node selector is invalid, holds node n1`,
		"b": `MigLayout "a" also selects node n1;`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.MigLayout
			if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &got); err != nil {
				t.Fatal(err)
			}
			cnd := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionConflict)
			if cnd == nil || cnd.Status != metav1.ConditionTrue || cnd.Reason != v1alpha1.ReasonOverlappingSelectors || !strings.Contains(cnd.Message, want) {
				t.Errorf("%s's Conflict condition %+v, want True (%s) saying %q", name, cnd, v1alpha1.ReasonOverlappingSelectors, want)
			}
		})
	}
}

// TestInvalidSelectorDropsUnstartedChangeOfSharedNode: b holds n1 with a
// change to halves written but not started (GPU 0 still Ready on the whole
// GPU) when its selector stops parsing, and a selects n1 too: both say the
// node is left as it is, so b drops the change rather than let the agent
// carry it out; a node only b holds keeps its change.
func TestInvalidSelectorDropsUnstartedChangeOfSharedNode(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	shared := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(a100(0).layout(wholeLayout)).build(), b)
	alone := ownedBy(nodeMigLayout("n2").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(a100(0).layout(wholeLayout)).build(), b)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "b"}), shared, alone).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	for _, name := range []string{"a", "b"} {
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for node, want := range map[string]string{"n1": wholeLayout, "n2": halvesLayout} {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), client.ObjectKey{Name: node}, &nml); err != nil {
			t.Fatal(err)
		}
		if got := nml.Spec.GPUs[0].Layout; got != want {
			t.Errorf("%s: spec %q, want %q", node, got, want)
		}
		if node == "n1" && !strings.Contains(nml.Spec.GPUs[0].Reason, "dropped before it started") {
			t.Errorf("n1: reason %q, want it to say the change was dropped", nml.Spec.GPUs[0].Reason)
		}
	}
	// b tells the change n2 carries out, not the one dropped on n1.
	var got v1alpha1.MigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "b"}, &got); err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue ||
		!strings.HasSuffix(p.Message, ": n2") {
		t.Errorf("b's Progressing %+v, want True naming n2 alone", p)
	}
}

// TestInvalidSelectorTellsChangesCarriedOut: a MigLayout whose selector
// stops parsing writes nothing new, but its agents go on with the changes
// written before: Progressing is True while a node it holds is on its way
// to one (a GPU Repartitioning or retried, or a change not begun yet,
// which a paused MigLayout drops), and False where none is, as for
// selected nodes: once every node it holds is Ready on its spec, and
// where a change waits on a device in use or the node's agent is lost.
func TestInvalidSelectorTellsChangesCarriedOut(t *testing.T) {
	tests := map[string]struct {
		status *gpuBuilder
		more   *gpuBuilder // a second GPU, the spec leaves out
		paused bool
		lost   bool
		want   metav1.ConditionStatus
	}{
		"repartitioning":    {status: a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "creating 3g.40gb@4"), want: metav1.ConditionTrue},
		"retried":           {status: a100(0).layout("3g.40gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPending, ""), want: metav1.ConditionTrue},
		"not begun":         {status: a100(0).layout(wholeLayout), want: metav1.ConditionTrue},
		"not begun, paused": {status: a100(0).layout(wholeLayout), paused: true, want: metav1.ConditionFalse},
		"done":              {status: a100(0).layout(halvesLayout), want: metav1.ConditionFalse},
		"stopping a GPU dropped from the spec": {status: a100(0).layout(halvesLayout), more: a100(1).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "settle period"),
			want: metav1.ConditionTrue},
		"paused, stopping a GPU dropped from the spec": {status: a100(0).layout(halvesLayout),
			more:   a100(1).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "creating 3g.40gb@4"),
			paused: true, want: metav1.ConditionTrue},
		"blocked":    {status: a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it"), want: metav1.ConditionFalse},
		"agent lost": {status: a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "creating 3g.40gb@4"), lost: true, want: metav1.ConditionFalse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := leaseTestStart
			a := staticMigLayout("a", "uid-a", "a")
			a.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
			a.Spec.Paused = tc.paused
			gpus := []*gpuBuilder{tc.status}
			if tc.more != nil {
				gpus = append(gpus, tc.more)
			}
			nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(gpus...).build(), a)
			objs := []client.Object{a, node("n1", map[string]string{"pool": "a"}), nml}
			if tc.lost {
				// Shown lost before; its Lease not renewed for an hour.
				a.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown}}
				objs = append(objs, agentLease("n1", now.Add(-time.Hour), 40))
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: leasesOnClock(&now)}
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.MigLayout
			if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
				t.Fatal(err)
			}
			p := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
			if p == nil || p.Status != tc.want || (tc.want == metav1.ConditionTrue) != strings.Contains(p.Message, "n1") {
				t.Errorf("Progressing %+v, want %s naming n1 where it is on its way", p, tc.want)
			}
			if r := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != v1alpha1.ReasonInvalidSelector {
				t.Errorf("Ready %+v, want reason %s", r, v1alpha1.ReasonInvalidSelector)
			}
		})
	}
}

// TestInvalidSelectorJudgesHeldNodesAgain: a node held by a MigLayout
// whose selector does not parse is judged as a selected one over time:
// the reconcile asks to run again when its live agent's Lease would run
// out (no event comes then), and a GPU Blocked on a device in use whose
// agent retries it (Draining again) does not make Progressing flap.
func TestInvalidSelectorJudgesHeldNodesAgain(t *testing.T) {
	now := leaseTestStart
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	lease := agentLease("n1", now, 40)
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it")).build(), a)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}), nml, lease).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: renewingLeases(&now, lease)}
	progressing := func(string) (metav1.ConditionStatus, time.Duration) {
		t.Helper()
		return reconcileProgressing(t, r, c)
	}
	status, after := progressing("blocked")
	if status != metav1.ConditionFalse {
		t.Errorf("blocked: Progressing %s, want False", status)
	}
	if after <= 0 || after > 40*time.Second+leaseExpirySlack {
		t.Errorf("blocked: requeued after %v, want by the Lease's expiry (40s)", after)
	}
	// The agent retries: the GPU drains again.
	var live v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &live); err != nil {
		t.Fatal(err)
	}
	live.Status.GPUs[0].Phase, live.Status.GPUs[0].Reason, live.Status.GPUs[0].Message = v1alpha1.PhaseDraining, "", ""
	if err := c.Status().Update(t.Context(), &live); err != nil {
		t.Fatal(err)
	}
	if status, _ := progressing("retried"); status != metav1.ConditionFalse {
		t.Errorf("retried: Progressing %s, want False as for the Blocked GPU it retries", status)
	}
}

// TestInvalidSelectorForgetsWhatHeldNodesFinished: a held node whose
// change is done asks for no wake-up, its agent lost or not (nothing of
// it can change the conditions), and a GPU Ready since it was Blocked is
// not judged later by that Blocked row: the node's agent repartitioning
// it again (its layout lost) is on its way, as a new controller judges.
func TestInvalidSelectorForgetsWhatHeldNodesFinished(t *testing.T) {
	now := leaseTestStart
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	// b selects n1 too: a conflict, where a change not begun is dropped.
	b := staticMigLayout("b", "uid-b", "a")
	a.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown}}
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it")).build(), a)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), nml, agentLease("n1", now.Add(-time.Hour), 40)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: leasesOnClock(&now)}
	setGPU := func(layout string, phase v1alpha1.GPUPhase) {
		t.Helper()
		var live v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &live); err != nil {
			t.Fatal(err)
		}
		live.Status.GPUs[0].Layout, live.Status.GPUs[0].Phase, live.Status.GPUs[0].Reason, live.Status.GPUs[0].Message = layout, phase, "", ""
		if err := c.Status().Update(t.Context(), &live); err != nil {
			t.Fatal(err)
		}
	}
	reconcile := func() (metav1.ConditionStatus, time.Duration) {
		t.Helper()
		return reconcileProgressing(t, r, c)
	}
	reconcile() // Blocked: remembered
	setGPU(halvesLayout, v1alpha1.PhaseReady)
	if _, after := reconcile(); after != 0 {
		t.Errorf("done, agent lost: requeued after %v, want no wake-up", after)
	}
	// The agent is back and repartitions the GPU again for the same spec.
	r.AgentLeases = nil
	setGPU(wholeLayout, v1alpha1.PhaseRepartitioning)
	if status, _ := reconcile(); status != metav1.ConditionTrue {
		t.Errorf("repartitioning again: Progressing %s, want True (not judged by the Blocked row of before)", status)
	}
}

// reconcileProgressing reconciles MigLayout "a" once with r and returns
// the status of its Progressing condition and the requeue asked for.
func reconcileProgressing(t *testing.T, r *Reconciler, c client.Client) (metav1.ConditionStatus, time.Duration) {
	t.Helper()
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	p := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
	if p == nil {
		t.Fatal("no Progressing condition")
	}
	return p.Status, res.RequeueAfter
}

// TestInvalidSelectorReleasesDeletedNodes: a MigLayout whose selector does
// not parse keeps the nodes it holds as they are, but the NodeMigLayout of
// a node deleted since goes, so that a node made again under the name is
// not held by a spec written for the old one.
func TestInvalidSelectorReleasesDeletedNodes(t *testing.T) {
	for _, paused := range []bool{false, true} {
		t.Run(fmt.Sprintf("paused %t", paused), func(t *testing.T) { testInvalidSelectorReleasesDeletedNodes(t, paused) })
	}
}

func testInvalidSelectorReleasesDeletedNodes(t *testing.T, paused bool) {
	_, ctx := ktesting.NewTestContext(t)
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Paused = paused
	a.Spec.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}
	gone := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(a100(0).layout("7g.80gb@0")).build(), a)
	kept := ownedBy(nodeMigLayout("n2").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(), a)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, gone, kept, node("n2", map[string]string{"pool": "a"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); !apierrors.IsNotFound(err) {
		t.Errorf("NodeMigLayout of deleted node n1: %v, spec %+v; want it released", err, got.Spec.GPUs)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &got); err != nil || got.Spec.GPUs[0].Layout != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("NodeMigLayout of n2 (its Node exists): %v, %+v; want it kept as it is", err, got.Spec.GPUs)
	}
}
