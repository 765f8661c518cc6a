package agent

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestFailedGPUThatFallsOffTheBusIsTold: a GPU whose change failed
// with an NVML error (Failed/NVMLError, one NVMLError event) and that then
// falls off the bus is Failed/GPUUnreadable: its devices are withdrawn from
// the pool, and the GPUUnreadable warning is recorded: an event is skipped
// as already reported only where both phase and reason are as before.
func TestFailedGPUThatFallsOffTheBusIsTold(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	reasons := func() []string { return eventReasons(rec) }
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := reasons(); len(got) == 0 || got[len(got)-1] != EventNVMLError {
		t.Fatalf("first pass events %q, want an NVMLError last", got)
	}
	if err := g.sim.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	st := reconcileThenRead(t, r, c, req)
	if len(st.Status.GPUs) != 1 || st.Status.GPUs[0].Reason != v1alpha1.ReasonGPUUnreadable {
		t.Fatalf("status %+v, want GPU 0 GPUUnreadable", st.Status.GPUs)
	}
	if got := reasons(); len(got) != 1 || got[0] != EventGPUUnreadable {
		t.Errorf("events once GPU 0 fell off the bus: %q, want [%s]", got, EventGPUUnreadable)
	}
}

// TestUnmanagedGPUThatFallsOffTheBusIsTold: a GPU the spec does not
// list (Auto mode lists only the GPUs a plan changed) that falls off the
// bus is Failed/GPUUnreadable in status ("managed or not, so that status
// shows it") and its devices are withdrawn: the GPUUnreadable warning is
// recorded for it too.
func TestUnmanagedGPUThatFallsOffTheBusIsTold(t *testing.T) {
	r, c, rec, req := unlistedGPULost(t)
	st := reconcileThenRead(t, r, c, req)
	lost := false
	for _, row := range st.Status.GPUs {
		lost = lost || row.Index == 1 && row.Reason == v1alpha1.ReasonGPUUnreadable
	}
	if !lost {
		t.Fatalf("status %+v, want GPU 1 GPUUnreadable", st.Status.GPUs)
	}
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	if len(got) != 1 || !strings.Contains(got[0], EventGPUUnreadable) || !strings.Contains(got[0], "GPU 1:") {
		t.Errorf("events once GPU 1 fell off the bus: %q, want one GPUUnreadable about GPU 1", got)
	}
}

// reconcileThenRead runs one pass of r and returns the NodeMigLayout it
// wrote.
func reconcileThenRead(t *testing.T, r *NodeReconciler, c client.Reader, req ctrl.Request) v1alpha1.NodeMigLayout {
	t.Helper()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var st v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// unlistedGPULost is a node of two A100s whose spec lists GPU 0 only, after
// a first pass (its events read) and with GPU 1 fallen off the bus since.
func unlistedGPULost(t *testing.T) (*NodeReconciler, client.WithWatch, *events.FakeRecorder, ctrl.Request) {
	t.Helper()
	g := newRig(t, "2xA100-SXM4-80GB")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	return r, c, rec, req
}

// TestGPUBackOnItsLayoutNotRepartitioned: a GPU on its layout falls off the
// bus (its row Failed/GPUUnreadable, no layout) and comes back with the
// layout untouched: no Repartitioned event, since nothing was changed.
func TestGPUBackOnItsLayoutNotRepartitioned(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	reconcileThenRead(t, r, c, req)
	if err := g.sim.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	if st := reconcileThenRead(t, r, c, req); st.Status.GPUs[0].Reason != v1alpha1.ReasonGPUUnreadable {
		t.Fatalf("GPU 0 off the bus: %+v, want GPUUnreadable", st.Status.GPUs[0])
	}
	if err := g.sim.RecoverGPU(0); err != nil {
		t.Fatal(err)
	}
	if st := reconcileThenRead(t, r, c, req); st.Status.GPUs[0].Phase != v1alpha1.PhaseReady {
		t.Fatalf("GPU 0 back: %+v, want Ready", st.Status.GPUs[0])
	}
	g.wantLayouts(t, "7g.80gb@0")
	for _, e := range eventReasons(rec) {
		if e == EventRepartitioned {
			t.Errorf("events %q: Repartitioned for a GPU that came back unchanged", eventReasons(rec))
		}
	}
}
