package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// killed is what killingManager panics with: the agent process killed.
type killed struct{}

// killingManager kills the agent (panics with killed) at its at-th
// mutating NVML call (a create, a destroy, a MIG mode change), before the
// call or, with after, once it has taken effect. ops lists the calls made.
type killingManager struct {
	gpu.Manager
	n, at int
	after bool
	ops   []string
}

func (c *killingManager) step(op string, do func() error) error {
	c.n++
	c.ops = append(c.ops, op)
	if c.at == c.n && !c.after {
		panic(killed{})
	}
	err := do()
	if c.at == c.n && c.after {
		panic(killed{})
	}
	return err
}

func (c *killingManager) CreateMIGDevice(ctx context.Context, i int, d mig.Device) (out gpu.MIGDevice, err error) {
	err = c.step("create "+d.String(), func() error { out, err = c.Manager.CreateMIGDevice(ctx, i, d); return err })
	return out, err
}

func (c *killingManager) DestroyMIGDevice(ctx context.Context, i int, d mig.Device) error {
	return c.step("destroy "+d.String(), func() error { return c.Manager.DestroyMIGDevice(ctx, i, d) })
}

func (c *killingManager) SetMIGMode(ctx context.Context, i int, on bool) (m gpu.MIGMode, err error) {
	err = c.step(fmt.Sprintf("mode %v", on), func() error { m, err = c.Manager.SetMIGMode(ctx, i, on); return err })
	return m, err
}

// syncUntilKilled runs one pass of r, reporting whether it was killed.
func syncUntilKilled(r *Repartitioner, specs []v1alpha1.GPUSpec) (died bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(killed); !ok {
				panic(p)
			}
			died = true
		}
	}()
	_, err = r.Sync(context.Background(), specs, nil)
	return false, err
}

// restart is a new agent process over the same NVML and journal file.
func (g *rig) restart(t *testing.T) {
	t.Helper()
	j, err := OpenJournal(g.dir + "/journal.json")
	if err != nil {
		t.Fatal(err)
	}
	g.inv = &fakeInventory{}
	g.r = &Repartitioner{GPUs: g.mgr, Inventory: g.inv, Allocations: g.alloc, Prepared: g.prep, Locks: g.locks, Journal: j,
		SettlePeriod: g.r.SettlePeriod, Sleep: g.r.Sleep}
}

// TestKilledAtAnyNVMLCallConverges (invariant 4): the agent killed before
// or after each of a pass's first six mutating NVML calls, in relayouts,
// MIG mode changes and half-done steps (a compute instance that failed,
// a GPU instance whose rollback failed), with the spec unchanged, gone or
// reverted on restart, converges in the next passes of a new process: the
// spec's layout (with the spec gone, not MIG mode without devices), no GPU
// instance without its compute instance, no MIG mode left pending, an empty
// journal, no device left tainted.
func TestKilledAtAnyNVMLCallConverges(t *testing.T) {
	type scenario struct {
		hw, from   string
		spec, then []v1alpha1.GPUSpec // then: the spec on restart
		half       string             // nvmlsim fault leaving a half step, "" none
	}
	off := v1alpha1.GPUSpec{Index: 0}
	sc := map[string]scenario{
		"relayout":           {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}},
		"relayout then gone": {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, then: []v1alpha1.GPUSpec{}},
		"relayout then back": {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, then: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}},
		"enable":             {hw: "1xA100-SXM4-80GB", from: "-", spec: []v1alpha1.GPUSpec{spec(0, "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4")}},
		"enable then off":    {hw: "1xA100-SXM4-80GB", from: "-", spec: []v1alpha1.GPUSpec{spec(0, "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4")}, then: []v1alpha1.GPUSpec{off}},
		"disable":            {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{off}},
		"disable then back":  {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{off}, then: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}},
		"H100 relayout":      {hw: "1xH100-SXM5-80GB", from: "7g.80gb@0", spec: []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4")}},
		"H100 relayout gone": {hw: "1xH100-SXM5-80GB", from: "7g.80gb@0", spec: []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,3g.40gb@4")}, then: []v1alpha1.GPUSpec{}},
		"enable then gone":   {hw: "1xA100-SXM4-80GB", from: "-", spec: []v1alpha1.GPUSpec{spec(0, "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4")}, then: []v1alpha1.GPUSpec{}},
		"disable then gone":  {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{off}, then: []v1alpha1.GPUSpec{}},
		"H100 enable gone":   {hw: "1xH100-SXM5-80GB", from: "-", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, then: []v1alpha1.GPUSpec{}},
		"H100 disable gone":  {hw: "1xH100-SXM5-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{off}, then: []v1alpha1.GPUSpec{}},
		"half destroy gone":  {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, then: []v1alpha1.GPUSpec{}, half: "GpuInstance.Destroy"},
		"half create gone":   {hw: "1xA100-SXM4-80GB", from: "3g.40gb@0,3g.40gb@4", spec: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, then: []v1alpha1.GPUSpec{}, half: "CreateComputeInstance"},
	}
	for name, s := range sc {
		for at := 1; at <= 6; at++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/call%d/after=%v", name, at, after), func(t *testing.T) {
					g := newRig(t, s.hw)
					if s.from != "-" {
						g.setup(t, 0, s.from)
					}
					if s.half != "" {
						// the Nth create/destroy half-done: its CI step fails and the GI rollback fails too
						op := s.half
						if err := g.sim.InjectFault(nvmlsim.Fault{Op: op, Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
							t.Fatal(err)
						}
						if op == "CreateComputeInstance" {
							if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
								t.Fatal(err)
							}
						}
					}
					cm := &killingManager{Manager: g.mgr, at: at, after: after}
					g.r.GPUs = cm
					died, err := syncUntilKilled(g.r, s.spec)
					if !died {
						// The pass made fewer calls than at, so there is
						// nothing to kill at: fine, unless it made none, or
						// failed where no fault was injected.
						if at == 1 || (err != nil && s.half == "") {
							t.Fatalf("pass not killed at call %d: err %v, ops %v", at, err, cm.ops)
						}
						t.Skip("no such call", err, cm.ops)
					}
					_ = g.sim.ClearFaults()
					g.restart(t)
					final := s.spec
					if s.then != nil {
						final = s.then
					}
					// As the agent does: the spec read again live before
					// each GPU's NVML work.
					g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) { return final, nil }
					for range 3 {
						if _, err := g.r.Sync(context.Background(), final, nil); err != nil {
							t.Fatal(err)
						}
					}
					snap := g.sim.Snapshot()
					for _, gi := range snap.GPUs[0].GPUInstances {
						if len(gi.ComputeInstances) == 0 {
							t.Errorf("GI at %d left without a CI (ops %v)", gi.Placement.Start, cm.ops)
						}
					}
					if snap.GPUs[0].MIGCurrent != snap.GPUs[0].MIGPending {
						t.Errorf("MIG mode left pending: current %v pending %v", snap.GPUs[0].MIGCurrent, snap.GPUs[0].MIGPending)
					}
					if len(final) > 0 {
						want := "-"
						if final[0].MIGEnabled {
							want = mig.MustParseLayout(final[0].Layout).Canonical().String()
						}
						if diff := cmp.Diff([]string{want}, g.layouts(t)); diff != "" {
							t.Errorf("layout (-want +got) after ops %v:\n%s", cm.ops, diff)
						}
					} else if snap.GPUs[0].MIGCurrent && len(snap.GPUs[0].GPUInstances) == 0 {
						// No spec: whatever the kill left, not a GPU in
						// MIG mode without devices, published as nothing.
						t.Errorf("GPU left in MIG mode without devices after ops %v; published %v", cm.ops, g.inv.last().devices)
					}
					if e := g.r.Journal.Entries(); len(e) != 0 {
						t.Errorf("journal left: %+v", e)
					}
					if last := g.inv.last(); len(last.draining) != 0 {
						t.Errorf("taints left: %v", last.draining)
					}
				})
			}
		}
	}
}

// TestKilledAfterEnablingForRefusedLayout: as
// TestRefusedOnceMIGIsFirstEnabledTurnsMIGOffAgain (a driver that answers no
// profile with MIG mode off), but the agent is killed
// right after MIG mode went on, before it checked the layout against the
// GPU's profile table. The restarted agent, which reads the table and
// refuses the layout without touching the GPU, turns MIG mode off again
// (the journal says the agent turned it on for that work): the GPU is
// published whole, as without the kill, not left in MIG mode without
// devices.
func TestKilledAfterEnablingForRefusedLayout(t *testing.T) {
	g := nvmlhA100RigWith(t, rightHalfOnly3g(t))
	cm := &killingManager{Manager: g.mgr, at: 1, after: true} // SetMIGMode(true) done, then killed
	g.r.GPUs = cm
	specs := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	if died, err := syncUntilKilled(g.r, specs); !died {
		t.Fatalf("not killed: %v %v", err, cm.ops)
	}
	g.restart(t)
	var res *SyncResult
	for range 2 {
		var err error
		if res, err = g.r.Sync(t.Context(), specs, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Errorf("GPU 0 %+v, want InvalidLayout", r)
	}
	st := g.sim.Snapshot().GPUs[0]
	if st.MIGCurrent || st.MIGPending {
		t.Errorf("after restart: MIG current %v pending %v, published %v; want MIG off and gpu-0 published, as without the kill",
			st.MIGCurrent, st.MIGPending, g.inv.last().devices)
	}
	if got := g.inv.last().devices; !cmp.Equal(got, []string{"gpu-0"}) {
		t.Errorf("published %v, want the whole GPU", got)
	}
}

// TestPendingEnableKeptThroughInvalidLayout: the agent's MIG enable, left
// pending (a process holds the GPU), stays the agent's through a pass whose
// spec asks a layout refused as InvalidLayout, so that once no spec asks
// for the GPU the pending enable is cancelled.
func TestPendingEnableKeptThroughInvalidLayout(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.leaveEnablePending(t)
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Fatalf("GPU 0 %+v, want InvalidLayout", r)
	}
	g.wantPendingModeCancelled(t)
}

// TestOrphanDisableWithoutDevicesLeftPending: the agent disabled MIG mode
// (every MIG device destroyed) and another NVML client keeps the change
// pending; the MigLayout is then removed. The pending disable is not
// cancelled (no device waits under a taint, and the GPU would be left in
// MIG mode without devices): at its reset the GPU comes back whole.
func TestOrphanDisableWithoutDevicesLeftPending(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	client, err := g.sim.OpenClient(g.sim.Snapshot().GPUs[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{{Index: 0}}, nil); err != nil {
		t.Fatal(err)
	}
	if st := g.sim.Snapshot().GPUs[0]; !st.MIGCurrent || st.MIGPending || len(st.GPUInstances) != 0 {
		t.Fatalf("MIG current %v pending %v, %d GPU instances; want the disable pending, no device left", st.MIGCurrent, st.MIGPending, len(st.GPUInstances))
	}
	if err := g.sim.CloseClient(client); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), nil, nil); err != nil { // the MigLayout removed
		t.Fatal(err)
	}
	if err := g.sim.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Sync(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := g.inv.last().devices; !cmp.Equal(got, []string{"gpu-0"}) {
		st := g.sim.Snapshot().GPUs[0]
		t.Errorf("after the spec went and a reset: published %v (MIG current %v, %d GPU instances), want the whole GPU", got, st.MIGCurrent, len(st.GPUInstances))
	}
}

// TestNoSpecRetriesWithBackoff: on a node no MigLayout manages (no
// NodeMigLayout), a GPU instance left without its compute instance whose
// rollback fails is tried again with the backoff, not only at the next
// resync; once it is rolled back, no retry is asked for.
func TestNoSpecRetriesWithBackoff(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0")
	// An agent killed between creating 3g.40gb@4's GPU instance and its
	// compute instance, whose NodeMigLayout went meanwhile.
	g.orphan3g(t, 0, 4)
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepCreating,
		Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	r, _, _ := nodeReconcilerOn(t, g)
	if err := r.Client.Delete(t.Context(), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	res, err := r.Reconcile(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("a failed rollback on a node without NodeMigLayout: %+v, want a retry after the backoff", res)
	}
	if res, err = r.Reconcile(t.Context(), req); err != nil || res.RequeueAfter != 0 {
		t.Errorf("once rolled back: %+v, %v; want no retry", res, err)
	}
	if got := g.layouts(t); got[0] != "3g.40gb@0" {
		t.Errorf("layout %v, want the half-made GPU instance rolled back", got)
	}
}
