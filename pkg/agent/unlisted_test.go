package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// unlistingManager is a gpu.Manager whose process listings of GPU gpu fail
// on the calls fail picks (counted from 1, MIGProcesses and GPUProcesses
// together), with the error NVML's would wrap.
type unlistingManager struct {
	gpu.Manager
	gpu   int
	fail  func(call int) bool
	calls int
}

var errListing = &gpu.NVMLError{Op: "nvmlDeviceGetComputeRunningProcesses", Return: nvml.ERROR_UNKNOWN}

func (m *unlistingManager) listing(idx int) error {
	if idx != m.gpu {
		return nil
	}
	m.calls++
	if m.fail(m.calls) {
		return errListing
	}
	return nil
}

func (m *unlistingManager) MIGProcesses(ctx context.Context, idx int) (map[mig.Device][]gpu.Process, error) {
	if err := m.listing(idx); err != nil {
		return nil, err
	}
	return m.Manager.MIGProcesses(ctx, idx)
}

func (m *unlistingManager) GPUProcesses(ctx context.Context, idx int) ([]gpu.Process, error) {
	if err := m.listing(idx); err != nil {
		return nil, err
	}
	return m.Manager.GPUProcesses(ctx, idx)
}

// drained reports whether a publication of g's inventory drained a device
// of GPU idx.
func (g *rig) drained(idx int) bool {
	prefix := fmt.Sprintf("gpu-%d-", idx)
	return slices.ContainsFunc(g.inv.pubs, func(p publication) bool {
		return slices.ContainsFunc(p.draining, func(d string) bool { return strings.HasPrefix(d, prefix) })
	})
}

// TestUnlistedGPUKeepsItsDevices: NVML fails to list the compute processes
// of GPU 0 (the simulator's first GetComputeRunningProcesses call). The
// pass does not fail: GPU 0, whose change would destroy devices that may
// run a process, is not drained or changed and fails with NVMLError (to be
// retried); GPU 1 changes and the pool is republished.
func TestUnlistedGPUKeepsItsDevices(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0")
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GetComputeRunningProcesses", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if n := len(g.sim.Snapshot().Faults); n != 0 {
		t.Fatalf("%d faults left: the pass did not list GPU 0's processes", n)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4", "7g.80gb@0")
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError ||
		!strings.Contains(got.Message, "not destroyed: gpu-0-mig-3g40gb-9-0, gpu-0-mig-3g40gb-9-4") || !strings.Contains(got.Message, "ERROR_UNKNOWN") {
		t.Errorf("GPU 0: %s/%s (%q), want Failed/NVMLError naming its devices and NVML's error", got.Phase, got.Reason, got.Message)
	}
	if !res.Retry {
		t.Errorf("no retry asked for GPU 0")
	}
	if g.drained(0) {
		t.Errorf("GPU 0's devices were drained")
	}
	if got := res.Results[1]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1: %s/%s (%q), want Ready", got.Phase, got.Reason, got.Message)
	}
	if diff := cmp.Diff(publication{devices: []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-1-mig-7g80gb-0-0"}}, g.inv.last(), cmp.AllowUnexported(publication{})); diff != "" {
		t.Errorf("last publication (-want +got):\n%s", diff)
	}
}

// TestUnlistedGPUAfterTheDrain: GPU 0's processes are listed before the
// drain, and the live re-check after the settle period cannot list them.
// GPU 0 is left as it is (Failed/NVMLError), GPU 1 changes.
func TestUnlistedGPUAfterTheDrain(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.setup(t, 1, "3g.40gb@0")
	// Call 1 is the pass's first listing, call 2 the live re-check's.
	g.r.GPUs = &unlistingManager{Manager: g.mgr, gpu: 0, fail: func(call int) bool { return call == 2 }}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !g.drained(0) {
		t.Fatalf("GPU 0 not drained: the listing failed before the live re-check")
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4", "7g.80gb@0")
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonNVMLError || !strings.Contains(got.Message, "not destroyed") {
		t.Errorf("GPU 0: %s/%s (%q), want Failed/NVMLError", got.Phase, got.Reason, got.Message)
	}
	if got := res.Results[1]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 1: %s/%s (%q), want Ready", got.Phase, got.Reason, got.Message)
	}
	for _, e := range g.r.Journal.Entries() {
		if e.GPU == 0 && e.Step != StepDraining {
			t.Errorf("GPU 0's journal entry at %s, want none or Draining (no NVML step)", e.Step)
		}
	}
}

// TestUnlistedGPUStillGainsDevices: with GPU 0's processes never listed,
// a change that destroys nothing is made, and every device of the GPU is
// reported in use (so the Auto planner plans no change that destroys one).
func TestUnlistedGPUStillGainsDevices(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	g.r.GPUs = &unlistingManager{Manager: g.mgr, gpu: 0, fail: func(int) bool { return true }}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %s/%s (%q), want Ready", got.Phase, got.Reason, got.Message)
	}
	if diff := cmp.Diff("3g.40gb@0,3g.40gb@4", res.InUse[0].String()); diff != "" {
		t.Errorf("in use (-want +got):\n%s", diff)
	}
}

// TestUnlistedGPUStopsOnlyOnTheContext: a listing that fails because the
// pass's context ended fails the pass, as before.
func TestUnlistedGPUStopsOnlyOnTheContext(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	ctx, cancel := context.WithCancel(t.Context())
	g.r.GPUs = &unlistingManager{Manager: g.mgr, gpu: 0, fail: func(int) bool { cancel(); return true }}
	if _, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil); !errors.Is(err, errListing) {
		t.Errorf("Sync: %v, want the listing's error", err)
	}
	g.wantLayouts(t, "3g.40gb@0")
}

// TestUnlistedGPUAtTheRepublication: GPU 0's processes are listed before
// the drain and in its re-check, and not at the end of the pass. Its
// devices are all reported in use, and the pass asks for a retry, which
// lists them again.
func TestUnlistedGPUAtTheRepublication(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.r.GPUs = &unlistingManager{Manager: g.mgr, gpu: 0, fail: func(call int) bool { return call == 2 }}
	desired := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	res, err := g.r.Sync(t.Context(), desired, nil)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if res.InUse[0].String() != "3g.40gb@0,3g.40gb@4" || !res.Retry {
		t.Errorf("in use %q, retry %t; want every device in use and a retry", res.InUse[0], res.Retry)
	}
	if res, err = g.r.Sync(t.Context(), desired, nil); err != nil || len(res.InUse[0]) != 0 || res.Retry {
		t.Errorf("the retry: in use %q, retry %t, %v; want nothing in use, no retry", res.InUse[0], res.Retry, err)
	}
}

// TestMissingGPUKeepsItsJournalEntry: a GPU that NVML does not count (not
// enumerated after a crash and a reboot) keeps the journal entry of the
// work the agent had in flight on it, so that the agent undoes that work
// (a MIG mode it set, still pending) once the GPU is back: where the spec
// names it (it is GPUMissing) and where no spec does any more (its
// NodeMigLayout deleted, or Auto mode dropping it meanwhile).
func TestMissingGPUKeepsItsJournalEntry(t *testing.T) {
	for name, specs := range map[string][]v1alpha1.GPUSpec{
		"named by the spec":    {spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4")},
		"named by no spec":     {spec(0, "7g.80gb@0")},
		"no spec for the node": nil,
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			if err := g.r.Journal.Record(JournalEntry{GPU: 1, UUID: "GPU-gone", Step: StepSettingMIGMode, Desired: "3g.40gb@0,3g.40gb@4", ModeSet: ptr.To(true)}); err != nil {
				t.Fatal(err)
			}
			res, err := g.r.Sync(t.Context(), specs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, asked := res.Results[1]; asked && (got.Phase != v1alpha1.PhaseFailed || got.Reason != v1alpha1.ReasonGPUMissing) {
				t.Errorf("GPU 1: %s/%s (%q), want Failed/GPUMissing", got.Phase, got.Reason, got.Message)
			}
			if !slices.ContainsFunc(g.r.Journal.Entries(), func(e JournalEntry) bool { return e.GPU == 1 }) {
				t.Errorf("GPU 1's journal entry cleared; want it kept while the GPU is missing")
			}
		})
	}
}
