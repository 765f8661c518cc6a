package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestFailedGPUWaitsForItsRetry: a GPU whose change failed on an NVML error
// is retried when the failing backoff says, not by every pass that comes
// sooner (a ResourceClaim of the node changed, a Wake): such a pass leaves
// it as it is, with no drain of its devices, while it changes the node's
// other GPUs. A new spec for the GPU is tried at once.
func TestFailedGPUWaitsForItsRetry(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0"))
	r.Now = func() time.Time { return clock }
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	failNextDestroy := func() {
		t.Helper()
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
	}
	// pass reconciles and returns its delay and whether it drained a
	// device of GPU 0.
	pass := func(what string) (time.Duration, bool) {
		t.Helper()
		before := len(g.inv.pubs)
		res, err := r.Reconcile(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		drained := slices.ContainsFunc(g.inv.pubs[before:], func(p publication) bool {
			return slices.ContainsFunc(p.draining, func(d string) bool { return strings.HasPrefix(d, "gpu-0-") })
		})
		return res.RequeueAfter, drained
	}
	wantGPU0 := func(what string, phase v1alpha1.GPUPhase, reason string) {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
			t.Fatal(err)
		}
		if st := nml.Status.GPUs[0]; st.Phase != phase || st.Reason != reason {
			t.Errorf("%s: GPU 0 %s/%s (%q), want %s/%s", what, st.Phase, st.Reason, st.Message, phase, reason)
		}
	}
	setSpec := func(specs ...v1alpha1.GPUSpec) {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
			t.Fatal(err)
		}
		nml.Spec.GPUs = specs
		nml.Generation++
		if err := c.Update(t.Context(), &nml); err != nil {
			t.Fatal(err)
		}
	}

	failNextDestroy()
	d, drained := pass("first pass")
	if !drained || d <= 0 {
		t.Fatalf("first pass: drained GPU 0 %t, retry after %v; want a drain and a retry", drained, d)
	}
	wantGPU0("first pass", v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError)

	// A pass before the retry is due (a ResourceClaim event), with a new
	// spec for GPU 1 only (a device to create: no destroy to fault).
	failNextDestroy()
	setSpec(spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4"))
	clock = clock.Add(d / 2)
	early, drained := pass("early pass")
	if drained {
		t.Errorf("early pass drained GPU 0, whose retry is not due")
	}
	if n := len(g.sim.Snapshot().Faults); n != 1 {
		t.Errorf("early pass: %d faults left, want the one injected (no destroy tried on GPU 0)", n)
	}
	wantGPU0("early pass", v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError)
	if diff := cmp.Diff([]string{"3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4"}, g.layouts(t)); diff != "" {
		t.Errorf("early pass: layouts (-want +got):\n%s", diff)
	}
	if early <= 0 || early > d-d/2 {
		t.Errorf("early pass: retry after %v, want at most the %v left until GPU 0's retry", early, d-d/2)
	}

	// The retry, when due.
	clock = clock.Add(early)
	d, drained = pass("retry")
	if !drained || len(g.sim.Snapshot().Faults) != 0 {
		t.Errorf("retry: drained GPU 0 %t, %d faults left; want GPU 0 tried again", drained, len(g.sim.Snapshot().Faults))
	}
	wantGPU0("retry", v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError)

	// A new spec for GPU 0 is tried at once.
	setSpec(spec(0, "4g.40gb@0,3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4"))
	clock = clock.Add(d / 2)
	if _, drained = pass("new spec"); !drained {
		t.Errorf("new spec: GPU 0 not tried")
	}
	wantGPU0("new spec", v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied)
}

// TestPassFailedAfterTheChangeSaysSo: the republication that ends a pass
// fails after GPU 0 was repartitioned. Its status says the change was made
// and the pass failed after it (not that the change was not done); the
// retry publishes the pool and shows it Ready.
func TestPassFailedAfterTheChangeSaysSo(t *testing.T) {
	f := newHalvesToWhole(t)
	f.g.inv.failRepublish = errors.New("the API server is unavailable")
	f.reconcileFails(t, "its republication failed")
	if diff := cmp.Diff([]string{"7g.80gb@0"}, f.g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || !strings.HasPrefix(st.Message, changedButFailed) {
		t.Errorf("GPU 0 %s/%s (%q), want Pending/%s saying the change was made", st.Phase, st.Reason, st.Message, ReasonPassFailed)
	}
	f.g.inv.failRepublish = nil
	f.reconcile(t)
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhaseReady {
		t.Errorf("after the retry GPU 0 %s/%s (%q), want Ready", st.Phase, st.Reason, st.Message)
	}
}

// TestChangedStatusOutlivesASecondFailedPass: the republication keeps
// failing. The first failed pass changed GPU 0 and says so; the second
// finds it on its layout (no report) and fails again: the status still says
// the change was made.
func TestChangedStatusOutlivesASecondFailedPass(t *testing.T) {
	f := newHalvesToWhole(t)
	f.g.inv.failRepublish = errors.New("the API server is unavailable")
	for pass := 1; pass <= 2; pass++ {
		f.reconcileFails(t, "its republication failed")
		if st := f.nml(t).Status.GPUs[0]; !strings.HasPrefix(st.Message, changedButFailed) {
			t.Errorf("pass %d: GPU 0 %s/%s (%q), want it to say its change was made (NVML holds %v)", pass, st.Phase, st.Reason, st.Message, f.g.layouts(t))
		}
	}
}

// TestDeferredGPUJudgedAnewIsNoLongerDeferred: a GPU deferred after a
// failure becomes unreadable for a pass (its result now GPUUnreadable),
// then readable again before its retry was due. It is tried at once, not
// shown again with the old failure (which would record a Warning for a
// change nobody tried).
func TestDeferredGPUJudgedAnewIsNoLongerDeferred(t *testing.T) {
	f := newFailedChange(t)
	if err := f.g.sim.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(f.retry / 4)
	f.reconcile(t)
	if err := f.g.sim.RecoverGPU(0); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(f.retry / 4)
	f.reconcile(t)
	if diff := cmp.Diff([]string{"7g.80gb@0"}, f.g.layouts(t)); diff != "" {
		t.Errorf("layouts after the GPU came back (-want +got):\n%s", diff)
	}
}

// TestDeferralEndsWithItsNodeMigLayout: a NodeMigLayout deleted and made
// again with the same spec (a common way to kick a node) starts afresh:
// its GPU is tried at once, not shown with the deleted object's failure.
func TestDeferralEndsWithItsNodeMigLayout(t *testing.T) {
	f := newFailedChange(t)
	old := f.nml(t)
	if err := f.c.Delete(t.Context(), &old); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	fresh := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	if err := f.c.Create(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(f.retry / 2)
	f.reconcile(t)
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhaseReady {
		t.Errorf("the new NodeMigLayout's GPU 0 %s/%s (%q), want it tried and Ready", st.Phase, st.Reason, st.Message)
	}
}

// failedChange is one A100-SXM4-80GB on 3g.40gb@0,3g.40gb@4 whose
// NodeMigLayout (node n1) asks for 7g.80gb@0, with the reconciler's clock;
// newFailedChange makes a first pass whose change fails on an NVML error
// (ERROR_UNKNOWN destroying a compute instance), retry the delay it asked
// for.
type failedChange struct {
	g     *rig
	r     *NodeReconciler
	c     client.Client
	clock time.Time
	retry time.Duration
}

// newHalvesToWhole is the node before any pass.
func newHalvesToWhole(t *testing.T) *failedChange {
	t.Helper()
	f := &failedChange{g: newRig(t, "1xA100-SXM4-80GB"), clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	f.r, f.c, _ = nodeReconcilerOn(t, f.g, spec(0, "7g.80gb@0"))
	f.r.Now = func() time.Time { return f.clock }
	return f
}

func newFailedChange(t *testing.T) *failedChange {
	t.Helper()
	f := newHalvesToWhole(t)
	if err := f.g.sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	f.retry = f.reconcile(t).RequeueAfter
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhaseFailed || f.retry <= 0 {
		t.Fatalf("GPU 0 %s/%s, retry after %v; want Failed, retried", st.Phase, st.Reason, f.retry)
	}
	return f
}

// reconcile runs one pass of node n1, which must not fail as a whole.
func (f *failedChange) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := f.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// reconcileFails runs one pass of node n1, which must fail as a whole
// (why: what makes it fail).
func (f *failedChange) reconcileFails(t *testing.T, why string) {
	t.Helper()
	if _, err := f.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err == nil {
		t.Fatalf("the pass succeeded, though %s", why)
	}
}

// nml reads node n1's NodeMigLayout.
func (f *failedChange) nml(t *testing.T) v1alpha1.NodeMigLayout {
	t.Helper()
	var nml v1alpha1.NodeMigLayout
	if err := f.c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	return nml
}

// TestPassFailingBeforeAnyGPUSaysWhy: a pass fails before it shows any GPU
// in flight (NVML's first read fails). The GPU whose change it did not
// reach shows why (Pending, PassFailed, once with an event), instead of
// keeping the row of the layout it had; a GPU already on its layout is left
// as it is.
func TestPassFailingBeforeAnyGPUSaysWhy(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "7g.80gb@0")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}
	nml.Generation++
	if err := c.Update(t.Context(), &nml); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though NVML's first read failed")
	}
	if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
		t.Fatal(err)
	}
	if st := nml.Status.GPUs[0]; st.Phase != v1alpha1.PhasePending || st.Reason != ReasonPassFailed || !strings.Contains(st.Message, "ERROR_UNKNOWN") {
		t.Errorf("GPU 0 (its change not reached) %s/%s (%q), want Pending/%s with the error", st.Phase, st.Reason, st.Message, ReasonPassFailed)
	}
	if st := nml.Status.GPUs[1]; st.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1 (on its layout) %s/%s (%q), want Ready", st.Phase, st.Reason, st.Message)
	}
	var evs []string
	for len(rec.Events) > 0 {
		evs = append(evs, <-rec.Events)
	}
	if len(evs) != 1 || !strings.Contains(evs[0], "Warning "+EventPassFailed) || !strings.Contains(evs[0], "GPU 0") {
		t.Errorf("events %q, want one Warning %s for GPU 0", evs, EventPassFailed)
	}
	// The retry, NVML readable again, makes the change.
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"7g.80gb@0", "7g.80gb@0"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts after the retry (-want +got):\n%s", diff)
	}
}
