package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestFailingPassesObserve: a GPU's passes count as failing from the first
// time it is seen Pending with PassFailed, through the retries' Draining
// and Repartitioning and a new spec's Pending, keeping the last failure's
// message, until it is seen Ready, Blocked or Failed, or is no longer
// reported; a NodeMigLayout gone forgets its node, and so does the node
// seen under another MigLayout.
func TestFailingPassesObserve(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	report := func(rows ...*gpuBuilder) *v1alpha1.NodeMigLayout {
		return nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(rows...).build()
	}
	failedWith := func(idx int32, msg string) *gpuBuilder {
		return a100(idx).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, msg)
	}
	failed := func(idx int32) *gpuBuilder { return failedWith(idx, "publishing the drain: forbidden") }
	in := func(idx int32, p v1alpha1.GPUPhase, reason string) *gpuBuilder {
		return a100(idx).phase(p, reason, "retrying")
	}
	since := func(m int) failingGPU { return failingGPU{since: at(m), last: "publishing the drain: forbidden"} }
	var f failingPasses
	steps := []struct {
		name   string
		layout string // "": a
		nml    *v1alpha1.NodeMigLayout
		at     time.Time
		want   map[int32]failingGPU
	}{
		{"first failure", "", report(failed(0), in(1, v1alpha1.PhasePending, v1alpha1.ReasonPending)), at(0), map[int32]failingGPU{0: since(0)}},
		{"the retry repartitions", "", report(in(0, v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning), in(1, v1alpha1.PhasePending, v1alpha1.ReasonPending)), at(2), map[int32]failingGPU{0: since(0)}},
		{"and fails again", "", report(failed(0), failed(1)), at(3), map[int32]failingGPU{0: since(0), 1: since(3)}},
		{"a new spec", "", report(in(0, v1alpha1.PhasePending, v1alpha1.ReasonPending), failed(1)), at(4), map[int32]failingGPU{0: since(0), 1: since(3)}},
		{"fails again, otherwise", "", report(failedWith(0, "reading claims: timeout"), failed(1)), at(5), map[int32]failingGPU{0: {since: at(0), last: "reading claims: timeout"}, 1: since(3)}},
		{"GPU 0 ready, GPU 1 blocked", "", report(in(0, v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied), in(1, v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse)), at(6), nil},
		{"failing anew", "", report(failed(0), failed(1)), at(7), map[int32]failingGPU{0: since(7), 1: since(7)}},
		{"GPU 1 no longer reported", "", report(in(0, v1alpha1.PhaseDraining, v1alpha1.ReasonDraining)), at(8), map[int32]failingGPU{0: since(7)}},
		{"GPU 1 back failing", "", report(failed(0), failed(1)), at(9), map[int32]failingGPU{0: since(7), 1: since(9)}},
		{"NodeMigLayout gone", "", nil, at(10), nil},
		{"back", "", report(failed(0)), at(11), map[int32]failingGPU{0: since(11)}},
		{"under another MigLayout", "b", report(failed(0)), at(12), map[int32]failingGPU{0: since(12)}},
		{"and back under the first", "", report(failed(0)), at(13), map[int32]failingGPU{0: since(13)}},
	}
	for _, s := range steps {
		layout := s.layout
		if layout == "" {
			layout = "a"
		}
		if diff := cmp.Diff(s.want, f.observe(layout, "n", s.nml, s.at), cmp.AllowUnexported(failingGPU{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestWithFailingPasses: a GPU whose passes have failed for
// PassesFailingAfter is stuck, saying since when and the last error, also
// while a retry repartitions it; younger ones give the time to look again;
// a lost agent's rows count for nothing.
func TestWithFailingPasses(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) failingGPU {
		return failingGPU{since: now.Add(-d), last: "publishing the drain: forbidden"}
	}
	rows := []*gpuBuilder{
		a100(0).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "publishing the drain: forbidden"),
		a100(1).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "publishing the drain: forbidden"),
		a100(2).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "publishing the drain: forbidden"),
		a100(3).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""),
	}
	nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(rows...).build()
	tests := map[string]struct {
		failing   map[int32]failingGPU
		lost      bool
		wantStuck []int32
		wantNext  time.Time
	}{
		"failing for the limit": {
			failing:   map[int32]failingGPU{0: ago(PassesFailingAfter)},
			wantStuck: []int32{0},
		},
		"failing for less: looked at again when it reaches the limit": {
			failing:  map[int32]failingGPU{0: ago(4 * time.Minute)},
			wantNext: now.Add(PassesFailingAfter - 4*time.Minute),
		},
		"the next of several": {
			failing:   map[int32]failingGPU{0: ago(2 * time.Minute), 1: ago(7 * time.Minute), 2: ago(time.Hour)},
			wantStuck: []int32{2},
			wantNext:  now.Add(PassesFailingAfter - 7*time.Minute),
		},
		"retrying after the limit": {
			failing:   map[int32]failingGPU{3: ago(time.Hour)},
			wantStuck: []int32{3},
		},
		"retrying before the limit": {
			failing:  map[int32]failingGPU{3: ago(time.Minute)},
			wantNext: now.Add(PassesFailingAfter - time.Minute),
		},
		"none failing": {},
		"a lost agent's rows": {
			failing: map[int32]failingGPU{0: ago(time.Hour)},
			lost:    true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := EvaluateNode("n", nml, nil, AgentHealth{Lost: tc.lost, Message: "lost"})
			st, next := withFailingPasses(st, nml, tc.failing, now)
			var stuck []int32
			for _, g := range st.Stuck {
				stuck = append(stuck, g.GPU)
				since := tc.failing[g.GPU].since.UTC().Format(time.RFC3339)
				if g.Reason != v1alpha1.ReasonPassFailed || !strings.Contains(g.Message, "forbidden") || !strings.Contains(g.Message, since) {
					t.Errorf("stuck GPU %d: %+v, want PassFailed saying since %s and the last error", g.GPU, g, since)
				}
				if g.GPU == 3 && (g.Phase != v1alpha1.PhaseRepartitioning || !strings.Contains(g.Message, "now Repartitioning")) {
					t.Errorf("stuck GPU 3: %+v, want it shown Repartitioning", g)
				}
			}
			if diff := cmp.Diff(tc.wantStuck, stuck); diff != "" {
				t.Errorf("stuck GPUs (-want +got):\n%s", diff)
			}
			if !next.Equal(tc.wantNext) {
				t.Errorf("next look at %v, want %v", next, tc.wantNext)
			}
		})
	}
}

// TestReconcileDegradedByFailingPasses: a MigLayout whose node's agent
// keeps failing its passes on a GPU, retrying in between, asks to be looked
// at again when the first failure it saw is PassesFailingAfter old, and is
// Degraded with reason PassFailed from then on, not before, through the
// next retry, until one succeeds; the retries' phases, which move the
// row's lastTransitionTime, do not reset the count.
func TestReconcileDegradedByFailingPasses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	failed := func() *gpuBuilder {
		g := a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "reading ResourceClaim allocations: forbidden")
		g.g.LastTransitionTime = &metav1.Time{Time: now}
		return g
	}
	nml := ownedBy(nodeMigLayout("n1").spec(halves).status(failed()).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	degraded := func() (*metav1.Condition, time.Duration) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded), res.RequeueAfter
	}
	report := func(g *gpuBuilder) {
		t.Helper()
		var cur v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.GPUs = []v1alpha1.GPUStatus{g.build()}
		if err := c.Status().Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	start := now
	cond, requeue := degraded()
	if cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("at the first failure: Degraded %+v, want False", cond)
	}
	if requeue < PassesFailingAfter || requeue > PassesFailingAfter+2*time.Second {
		t.Errorf("at the first failure: requeue after %v, want about %v", requeue, PassesFailingAfter)
	}
	// A retry repartitions and fails again, 6 minutes later.
	now = start.Add(5 * time.Minute)
	report(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""))
	degraded()
	now = start.Add(6 * time.Minute)
	report(failed())
	cond, requeue = degraded()
	if cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("6 minutes on: Degraded %+v, want False", cond)
	}
	if want := PassesFailingAfter - 6*time.Minute; requeue < want || requeue > want+2*time.Second {
		t.Errorf("6 minutes on: requeue after %v, want about %v", requeue, want)
	}
	now = now.Add(requeue)
	cond, _ = degraded()
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonPassFailed || !strings.Contains(cond.Message, "forbidden") {
		t.Errorf("%v after the first failure: Degraded %+v, want True, PassFailed, saying why", PassesFailingAfter, cond)
	}
	// The next retry repartitions: the MigLayout stays Degraded, saying
	// why the last pass failed, until a retry gets through.
	report(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""))
	if cond, _ = degraded(); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonPassFailed || !strings.Contains(cond.Message, "forbidden") {
		t.Errorf("while a retry repartitions: Degraded %+v, want True, PassFailed, saying why the last pass failed", cond)
	}
	report(a100(0).layout("3g.40gb@0,3g.40gb@4").phase(v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, ""))
	if cond, _ = degraded(); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("once a retry succeeds: Degraded %+v, want False", cond)
	}
	report(failed())
	if cond, _ = degraded(); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("failing anew after a success: Degraded %+v, want False (counted from this failure)", cond)
	}
	// The node leaves the MigLayout's selection: its NodeMigLayout is
	// released, and its failing GPUs are forgotten with it.
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"pool": "elsewhere"}
	if err := c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if cond, _ = degraded(); cond != nil && cond.Reason == v1alpha1.ReasonPassFailed {
		t.Errorf("with the node no longer selected: Degraded %+v, want no PassFailed", cond)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &v1alpha1.NodeMigLayout{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the released node's NodeMigLayout: %v, want it deleted", err)
	}
	if got, ok := r.failing.since["n1"]; ok {
		t.Errorf("the released node's failing GPUs are still remembered: %v", got)
	}
}

// TestConflictedNodeForgetsFailingPasses: a node whose passes fail and
// which a second MigLayout then selects too is left alone (a conflict):
// the change its agent has begun is carried out and judged as before, its
// failing GPUs remembered, until it is done; then what was remembered of
// them goes.
func TestConflictedNodeForgetsFailingPasses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	failed := a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "reading ResourceClaim allocations: forbidden")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)).status(failed).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.failing.since["n1"]; !ok {
		t.Fatal("the failing GPU is not remembered: the test shows nothing")
	}
	if err := c.Create(ctx, staticMigLayout("b", "uid-b", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.failing.since["n1"]; !ok {
		t.Error("the conflicted node's change, begun, is carried out: its failing GPU is forgotten")
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.GPUs = []v1alpha1.GPUStatus{a100(0).layout("3g.40gb@0,3g.40gb@4").build()}
	if err := c.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.failing.since["n1"]; ok {
		t.Errorf("the conflicted node's change is done, its failing GPUs are still remembered: %v", got)
	}
}

// TestDeletedMigLayoutForgetsFailingPasses: a MigLayout deleted while its
// node's passes fail takes what was remembered of its failing GPUs with it
// (its NodeMigLayouts go by garbage collection, which the reconciler does
// not see), and leaves another MigLayout's nodes alone.
func TestDeletedMigLayoutForgetsFailingPasses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	spec := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	failed := func() *gpuBuilder {
		return a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "reading ResourceClaim allocations: forbidden")
	}
	a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "b")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "b"}),
			ownedBy(nodeMigLayout("n1").spec(spec).status(failed()).build(), a),
			ownedBy(nodeMigLayout("n2").spec(spec).status(failed()).build(), b)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	for _, name := range []string{"a", "b"} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range []string{"n1", "n2"} {
		if _, ok := r.failing.since[node]; !ok {
			t.Fatalf("node %s's failing GPU is not remembered: the test shows nothing", node)
		}
	}
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.failing.since["n1"]; ok {
		t.Errorf("the deleted MigLayout's node's failing GPUs are still remembered: %v", got)
	}
	if _, ok := r.failing.since["n2"]; !ok {
		t.Error("another MigLayout's node's failing GPUs are forgotten")
	}
}
