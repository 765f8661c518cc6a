package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRetryOfStuckGPUKeepsDegraded: a GPU the agent reports Failed or
// Blocked and retries (the retry drains and repartitions it, then it fails
// again) keeps the MigLayout Degraded, its node failed or blocked and the
// condition's lastTransitionTime, through each retry of the same spec, and
// is told Blocked once; a retry that succeeds, or a new spec, ends it.
func TestRetryOfStuckGPUKeepsDegraded(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	nml := ownedBy(nodeMigLayout("n1").spec(halves).status(a100(0).layout("7g.80gb@0")).build(), ml)
	nml.Generation = 1
	// The API server counts each spec write in metadata.generation.
	generations := interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		n, ok := obj.(*v1alpha1.NodeMigLayout)
		if !ok {
			return c.Patch(ctx, obj, patch, opts...)
		}
		var before v1alpha1.NodeMigLayout
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), &before); err != nil {
			return err
		}
		if err := c.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(before.Spec, n.Spec) {
			return nil
		}
		n.Generation = before.Generation + 1
		return c.Update(ctx, n)
	}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).WithInterceptorFuncs(generations).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec, Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	report := func(g *gpuBuilder) {
		t.Helper()
		var cur v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &cur); err != nil {
			t.Fatal(err)
		}
		row := g.build()
		row.LastTransitionTime = &metav1.Time{Time: now}
		cur.Status.GPUs = []v1alpha1.GPUStatus{row}
		cur.Status.ObservedGeneration = cur.Generation
		if err := c.Status().Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	reconcile := func() v1alpha1.MigLayoutStatus {
		t.Helper()
		now = now.Add(time.Minute)
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	draining := func() *gpuBuilder {
		return a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "draining 7g.80gb@0")
	}
	repartitioning := func() *gpuBuilder {
		return a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")
	}
	type want struct {
		degraded    metav1.ConditionStatus
		reason      string
		failedNodes int32
		rowPhase    v1alpha1.GPUPhase
	}
	check := func(step string, st v1alpha1.MigLayoutStatus, w want) *metav1.Condition {
		t.Helper()
		cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
		if cond == nil || cond.Status != w.degraded || cond.Reason != w.reason {
			t.Errorf("%s: Degraded %+v, want %s %s", step, cond, w.degraded, w.reason)
		}
		if st.FailedNodes != w.failedNodes {
			t.Errorf("%s: failedNodes %d, want %d", step, st.FailedNodes, w.failedNodes)
		}
		if len(st.Nodes) != 1 || st.Nodes[0].Phase != w.rowPhase {
			t.Errorf("%s: node rows %+v, want n1 %s", step, st.Nodes, w.rowPhase)
		}
		return cond
	}
	failed := want{metav1.ConditionTrue, v1alpha1.ReasonNVMLError, 1, v1alpha1.PhaseFailed}

	report(a100(0).layout("").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance 3g.40gb@0: ERROR_UNKNOWN"))
	first := check("failed", reconcile(), failed)
	for i := range 3 {
		report(draining())
		check("retry draining", reconcile(), failed)
		report(repartitioning())
		check("retry repartitioning", reconcile(), failed)
		report(a100(0).layout("").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance 3g.40gb@0: ERROR_UNKNOWN"))
		cond := check("failed again", reconcile(), failed)
		if first != nil && cond != nil && !cond.LastTransitionTime.Equal(&first.LastTransitionTime) {
			t.Errorf("retry %d: Degraded changed at %v, want it True since %v", i, cond.LastTransitionTime, first.LastTransitionTime)
		}
	}
	report(draining())
	reconcile()
	report(a100(0).layout("3g.40gb@0,3g.40gb@4").phase(v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, ""))
	check("a retry succeeds", reconcile(), want{metav1.ConditionFalse, v1alpha1.ReasonNoProblems, 0, v1alpha1.PhaseReady})

	// Blocked by a device another NVML client holds: told once, however
	// many retries drain the GPU again.
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	inUse := func() *gpuBuilder {
		return a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "7g.80gb@0 is in use by another NVML client")
	}
	blocked := want{metav1.ConditionTrue, v1alpha1.ReasonDeviceInUse, 1, v1alpha1.PhaseBlocked}
	report(inUse())
	check("blocked", reconcile(), blocked)
	for range 3 {
		report(draining())
		check("retry draining", reconcile(), blocked)
		report(inUse())
		check("blocked again", reconcile(), blocked)
	}
	// A retry whose pass fails as a whole (the drain publication refused)
	// keeps the judgement too, saying why its pass failed.
	report(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "the pass stopped before this GPU's change was done; retrying: admission webhook denied"))
	if cond := check("retry's pass failed", reconcile(), blocked); cond == nil || !strings.Contains(cond.Message, "admission webhook denied") {
		t.Errorf("retry's pass failed: Degraded %+v, want it to say why the pass failed", cond)
	}
	// Its passes failing for PassesFailingAfter are why it is stuck now:
	// counted once, with reason PassFailed.
	now = now.Add(PassesFailingAfter)
	longFailing := want{metav1.ConditionTrue, v1alpha1.ReasonPassFailed, 1, v1alpha1.PhaseBlocked}
	if cond := check("retry's pass failing for long", reconcile(), longFailing); cond == nil || strings.Count(cond.Message, "gpu 0") != 1 ||
		strings.Count(cond.Message, "admission webhook denied") != 1 || !strings.Contains(cond.Message, "another NVML client") {
		t.Errorf("retry's pass failing for long: Degraded %+v, want GPU 0 counted once, its pass's error and what it retried said once", cond)
	}
	report(inUse())
	check("blocked again", reconcile(), blocked)
	var told []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventBlocked) {
			told = append(told, e)
		}
	}
	if len(told) != 1 {
		t.Errorf("Blocked events %q, want one", told)
	}

	// A new spec: its drain is a change under way, not the old failure.
	var cur v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Rules = rules(rule("quarters").counts("2g.20gb", 3))
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	reconcile() // writes the new spec, of a new generation
	var spec v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Spec.GPUs[0].Layout == halves.Layout {
		t.Fatalf("the new rule's spec: %+v", spec.Spec.GPUs)
	}
	if spec.Generation != 2 {
		t.Fatalf("the new spec's generation %d, want 2", spec.Generation)
	}
	report(draining())
	st := reconcile()
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("a new spec's drain: Degraded %+v, want False", cond)
	}
	if st.ProgressingNodes != 1 {
		t.Errorf("a new spec's drain: progressingNodes %d, want 1", st.ProgressingNodes)
	}
}

// TestRetryPassFailedSaidFirst: the error of a retry's failed pass comes
// first in the message of the row it is judged as, so that a long Blocked
// message (claims and pods named) does not cut it off.
func TestRetryPassFailedSaidFirst(t *testing.T) {
	var f failingPasses
	spec := specGPU(0, wholeLayout, `rule "whole"`)
	long := strings.Repeat("3g.40gb@0 is held by ResourceClaim team/claim (pod a, b, c); ", 20)
	blocked := nodeMigLayout("n1").spec(spec).status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, long)).build()
	f.observe("a", "n1", blocked, time.Now())
	failed := nodeMigLayout("n1").spec(spec).status(a100(0).layout(halvesLayout).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "retrying: admission webhook denied")).build()
	f.observe("a", "n1", failed, time.Now())
	row := f.retriesAsStuck("a", "n1", failed).Status.GPUs[0]
	if row.Phase != v1alpha1.PhaseBlocked || !strings.HasPrefix(row.Message, msgRetryPassFailed+"retrying: admission webhook denied") || len(row.Message) > maxRowMessage {
		t.Errorf("judged row %s %q, want Blocked, the pass's error first, at most %d bytes", row.Phase, row.Message, maxRowMessage)
	}
}

// TestRetryPassFailingKeepsResetRequired: a GPU Blocked waiting for a reset
// whose retries' passes fail for PassesFailingAfter keeps its reason (it
// still needs the reset), the passes' error first in its message; one
// blocked by a device in use, or by an allocation the agent cannot tell
// (UnknownAllocation), is counted PassFailed then (its retries drain it
// only once no device is in use).
func TestRetryPassFailingKeepsResetRequired(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	spec := specGPU(0, wholeLayout, `rule "whole"`)
	for reason, want := range map[string]string{
		v1alpha1.ReasonResetRequired: v1alpha1.ReasonResetRequired,
		v1alpha1.ReasonDeviceInUse:   v1alpha1.ReasonPassFailed,
		// An allocation the agent cannot tell apart holds the GPU as a
		// device in use does.
		v1alpha1.ReasonUnknownAllocation: v1alpha1.ReasonPassFailed,
	} {
		var f failingPasses
		blocked := nodeMigLayout("n1").spec(spec).status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseBlocked, reason, "waiting")).build()
		f.observe("a", "n1", blocked, now)
		failed := nodeMigLayout("n1").spec(spec).status(a100(0).layout(halvesLayout).phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "retrying: admission webhook denied")).build()
		f.observe("a", "n1", failed, now)
		later := now.Add(PassesFailingAfter + time.Minute)
		failing := f.observe("a", "n1", failed, later)
		judged := f.retriesAsStuck("a", "n1", failed)
		st := EvaluateNode("n1", judged, nil, AgentHealth{})
		st, _ = withFailingPasses(st, judged, failing, later)
		if len(st.Stuck) != 1 || st.Stuck[0].Reason != want || !strings.Contains(st.Stuck[0].Message, "admission webhook denied") {
			t.Errorf("%s, its retries' passes failing for long: stuck %+v, want one, reason %s, saying why the passes fail", reason, st.Stuck, want)
		}
	}
}
