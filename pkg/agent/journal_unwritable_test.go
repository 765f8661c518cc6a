package agent

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestJournalWriteFailureIsNoNVMLError: the agent's state directory
// cannot be written (disk full, read-only mount). A GPU that only gains
// devices (MIG on, none yet: nothing to drain) fails at its first journal
// write in apply, before any NVML call: it is reported Failed/JournalUnwritable, not NVMLError, and
// miglayout_agent_nvml_errors_total counts nothing (an operator is sent to
// the disk, not the driver).
func TestJournalWriteFailureIsNoNVMLError(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	reg := prometheus.NewRegistry()
	g.r.Metrics = NewMetrics(reg)
	// The journal's directory becomes a file: every journal write fails.
	if err := os.RemoveAll(g.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(g.dir) })
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable {
		t.Errorf("journal write failure reported as %s/%s (%q), want Failed/%s", got.Phase, got.Reason, got.Message, ReasonJournalUnwritable)
	}
	if n := testutil.CollectAndCount(g.r.Metrics.nvmlErrors); n != 0 {
		t.Errorf("miglayout_agent_nvml_errors_total has %d series after a journal write failure, want none (NVML never failed)", n)
	}
}

// TestJournalUnwritableAtDrainStillRepublishes: with the state directory
// unwritable, a GPU whose change must drain devices cannot record the
// drain. It alone fails (JournalUnwritable), untouched and undrained, and
// the pass goes on to publish the pool from NVML truth: a GPU lost
// meanwhile leaves the pool and is reported, as in any pass.
func TestJournalUnwritableAtDrainStillRepublishes(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.setup(t, 1, "7g.80gb@0")
	if _, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil); err != nil {
		t.Fatal(err)
	}
	unwritableJournal(t, g)
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != ReasonJournalUnwritable {
		t.Errorf("GPU 0: %s/%s (%q), want Failed/%s", got.Phase, got.Reason, got.Message, ReasonJournalUnwritable)
	}
	if got := res.Results[1]; got.Reason != v1alpha1.ReasonGPUUnreadable {
		t.Errorf("GPU 1 (lost): %s/%s, want Failed/%s", got.Phase, got.Reason, v1alpha1.ReasonGPUUnreadable)
	}
	if got := g.sim.Snapshot().GPUs[0].Layout().String(); got != "7g.80gb@0" {
		t.Errorf("GPU 0 holds %q, want 7g.80gb@0 untouched", got)
	}
	last := g.inv.last()
	if diff := cmp.Diff([]string{"gpu-0-mig-7g80gb-0-0"}, last.devices); diff != "" {
		t.Errorf("published devices (-want +got):\n%s", diff)
	}
	if len(last.draining) != 0 {
		t.Errorf("published with %v draining, want none", last.draining)
	}
}

// TestJournalUnwritableAfterAChangeStillRepublishes: the journal becomes
// unwritable after GPU 0 was repartitioned, while GPU 1's change stops
// (its Repartitioning report refused) and its entry cannot be ended. The
// pass goes on to publish NVML truth: GPU 0's new devices, not the
// destroyed device its drain published.
func TestJournalUnwritableAfterAChangeStillRepublishes(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.setup(t, 1, "7g.80gb@0")
	report := func(idx int, r GPUResult) error {
		if idx == 1 && r.Phase == v1alpha1.PhaseRepartitioning {
			unwritableJournal(t, g)
			return errors.New("the API server is unavailable")
		}
		return nil
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")}, report)
	if err != nil {
		t.Fatalf("pass failed as a whole: %v", err)
	}
	if got := res.Results[0].Phase; got != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %s, want Ready", got)
	}
	if got := res.Results[1]; got.Phase != v1alpha1.PhasePending || !res.Retry {
		t.Errorf("GPU 1: %s/%s, retry %t; want Pending, retried", got.Phase, got.Reason, res.Retry)
	}
	last := g.inv.last()
	want := []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-1-mig-7g80gb-0-0"}
	if diff := cmp.Diff(want, last.devices); diff != "" {
		t.Errorf("published devices (-want +got):\n%s", diff)
	}
	if len(last.draining) != 0 {
		t.Errorf("published with %v draining, want none", last.draining)
	}
}

// TestJournalUnwritableIsShown: a GPU that cannot record its drain is
// shown in the NodeMigLayout's status (Failed, JournalUnwritable) and told
// by a Warning event, so an operator is sent to the disk.
func TestJournalUnwritableIsShown(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	unwritableJournal(t, g)
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.GPUs) != 1 || got.Status.GPUs[0].Phase != v1alpha1.PhaseFailed || got.Status.GPUs[0].Reason != ReasonJournalUnwritable {
		t.Errorf("status GPUs %+v, want GPU 0 Failed/%s", got.Status.GPUs, ReasonJournalUnwritable)
	}
	var evs []string
	for len(rec.Events) > 0 {
		evs = append(evs, <-rec.Events)
	}
	if !slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, "Warning "+EventJournalUnwritable) }) {
		t.Errorf("events %q, want a Warning %s", evs, EventJournalUnwritable)
	}
}

// unwritableJournal makes every later journal write fail: the journal's
// directory becomes a file (a full disk or a read-only mount would do).
func unwritableJournal(t *testing.T, g *rig) {
	t.Helper()
	if err := os.RemoveAll(g.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(g.dir) })
}

// afterDestroy is a gpu.Manager that calls after once its first destroy
// succeeds.
type afterDestroy struct {
	gpu.Manager
	after func()
}

func (a *afterDestroy) DestroyMIGDevice(ctx context.Context, idx int, d mig.Device) error {
	err := a.Manager.DestroyMIGDevice(ctx, idx, d)
	if err == nil && a.after != nil {
		a.after()
		a.after = nil
	}
	return err
}

// TestJournalUnwritablePartWaySaysWhatWasDone: the journal becomes
// unwritable after the first of two destroys: the GPU's result says the
// repartitioning stopped part way and what was done, not that it was not
// repartitioned (it has lost a device).
func TestJournalUnwritablePartWaySaysWhatWasDone(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.r.GPUs = &afterDestroy{Manager: g.mgr, after: func() { unwritableJournal(t, g) }}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, layout := res.Results[0], g.layouts(t)[0]
	if layout == "3g.40gb@0,3g.40gb@4" {
		t.Fatalf("GPU 0 lost no device: the test does not bite")
	}
	if got.Reason != ReasonJournalUnwritable || strings.Contains(got.Message, "not repartitioned") || !strings.Contains(got.Message, "stopped part way (done: ") {
		t.Errorf("GPU 0 holds %q, result %s/%s %q; want JournalUnwritable saying it stopped part way and what was done", layout, got.Phase, got.Reason, got.Message)
	}
}
