package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestAutoReclaimsIdleGPU: a GPU left with free fragments and nothing in use
// is given back as one 7g.80gb once it has been idle for the policy's
// reclaimIdleGPUsAfterSeconds, counted from the first pass that saw it
// idle: the controller asks to be woken then, though nothing changes; a
// GPU in use is left alone, and 0 turns reclaiming off.
func TestAutoReclaimsIdleGPU(t *testing.T) {
	for name, tc := range map[string]struct {
		seconds  *int32
		wantWake time.Duration
		want     map[int32]string
	}{
		"default, five minutes": {wantWake: 5 * time.Minute, want: map[int32]string{0: "7g.80gb@0"}},
		"one minute":            {seconds: ptr.To[int32](60), wantWake: time.Minute, want: map[int32]string{0: "7g.80gb@0"}},
		"off":                   {seconds: ptr.To[int32](0), want: map[int32]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: tc.seconds})
			n1 := autoNML("n1", ml,
				a100(0).layout("1g.10gb@0,2g.20gb@2,3g.40gb@4"),
				a100(1).layout("1g.10gb@0,3g.40gb@4").inUse("1g.10gb@0"))
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1)
			reclaimedBefore := testutil.ToFloat64(reclaimedMetric)
			// The passes before the plan wait out the batching window.
			if wake := h.settle(); wake > tc.wantWake || wake < tc.wantWake-h.a.Max {
				t.Errorf("first plan asks to be woken in %s, want %s less the batching window", wake, tc.wantWake)
			}
			if got := h.specOf("n1"); len(got) != 0 {
				t.Fatalf("spec %v before the GPU has been idle long enough", got)
			}
			h.now = h.now.Add(tc.wantWake + time.Second)
			h.settle()
			if diff := cmp.Diff(tc.want, h.specOf("n1")); diff != "" {
				t.Errorf("spec once idle long enough (-want +got):\n%s", diff)
			}
			if got, want := testutil.ToFloat64(reclaimedMetric)-reclaimedBefore, float64(len(tc.want)); got != want {
				t.Errorf("idle_gpus_reclaimed_total rose by %v, want %v", got, want)
			}
		})
	}
}

// TestReclaimDue: the planner is run for an idle GPU only where it would
// give it back whole: idle long enough, not whole already, on a node whose
// other GPUs hold the spares it keeps, that allows the largest profile and
// has no DeviceTaintRule naming that device.
func TestReclaimDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpu := func(layout string, idle time.Duration) planner.GPU {
		g := planner.GPU{Info: migslices.PlannedGPU(m, 0), Layout: mig.MustParseLayout(layout)}
		if idle > 0 {
			g.IdleSince = now.Add(-idle)
		}
		return g
	}
	policy := planner.Policy{ReclaimIdleAfter: time.Minute}
	for name, tc := range map[string]struct {
		policy planner.Policy
		frozen bool
		gpu    planner.GPU
		others []planner.GPU // the node's other GPUs
		want   bool
	}{
		"idle long enough": {policy: policy, gpu: gpu("1g.10gb@0", 2*time.Minute), want: true},
		"not long enough":  {policy: policy, gpu: gpu("1g.10gb@0", 30*time.Second)},
		"not idle":         {policy: policy, gpu: gpu("1g.10gb@0", 0)},
		"whole already":    {policy: policy, gpu: gpu("7g.80gb@0", time.Hour)},
		"off":              {gpu: gpu("1g.10gb@0", time.Hour)},
		"frozen":           {policy: policy, frozen: true, gpu: gpu("1g.10gb@0", time.Hour)},
		"spares":           {policy: planner.Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}, gpu: gpu("1g.10gb@0", time.Hour)},
		"spares on another GPU": {policy: planner.Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}, gpu: gpu("1g.10gb@0", time.Hour),
			others: []planner.GPU{func() planner.GPU { g := gpu("1g.10gb@6", 0); g.Info.Index = 1; return g }()}, want: true},
		"spares on another GPU, in use": {policy: planner.Policy{ReclaimIdleAfter: time.Minute, Spares: map[string]int{"1g.10gb": 1}}, gpu: gpu("1g.10gb@0", time.Hour),
			others: []planner.GPU{func() planner.GPU {
				g := gpu("1g.10gb@6", 0)
				g.Info.Index, g.Pinned = 1, mig.MustParseLayout("1g.10gb@6")
				return g
			}()}},
		"largest not allowed": {policy: planner.Policy{ReclaimIdleAfter: time.Minute, AllowedProfiles: []string{"1g.10gb"}}, gpu: gpu("1g.10gb@0", time.Hour)},
		"largest allowed":     {policy: planner.Policy{ReclaimIdleAfter: time.Minute, AllowedProfiles: []string{"1g.10gb", "7g.80gb"}}, gpu: gpu("1g.10gb@0", time.Hour), want: true},
		"whole device tainted": {policy: policy, gpu: func() planner.GPU {
			g := gpu("1g.10gb@0", time.Hour)
			g.Tainted = mig.MustParseLayout("7g.80gb@0")
			return g
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			n := planner.Node{Policy: tc.policy, Frozen: tc.frozen, GPUs: append([]planner.GPU{tc.gpu}, tc.others...)}
			if got := reclaimDue(planner.Snapshot{Now: now}, n, tc.gpu); got != tc.want {
				t.Errorf("reclaimDue = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestIdleTrackerCountsAfresh: a GPU's idle time counts from the first
// snapshot that sees it idle, and starts again once a device of it is in
// use or a change is in flight in between.
func TestIdleTrackerCountsAfresh(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snapAt := func(at time.Time, g planner.GPU) planner.Snapshot {
		return planner.Snapshot{Now: at, Nodes: []planner.Node{reclaimingNode("n1", g)}}
	}
	idle := a100GPU(t, "1g.10gb@0")
	inUse := a100GPU(t, "1g.10gb@0")
	inUse.Pinned = mig.MustParseLayout("1g.10gb@0")
	changing := a100GPU(t, "7g.80gb@0")
	changing.Changing = true
	whole := a100GPU(t, "7g.80gb@0")
	tr := idleTracker{}
	steps := []struct {
		at       time.Duration
		gpu      planner.GPU
		want     time.Duration // IdleSince - t0; -1: zero
		wantWake time.Duration
	}{
		{at: 0, gpu: idle, want: 0, wantWake: time.Minute},
		{at: 20 * time.Second, gpu: idle, want: 0, wantWake: 40 * time.Second},
		{at: 30 * time.Second, gpu: inUse, want: -1},
		{at: 40 * time.Second, gpu: idle, want: 40 * time.Second, wantWake: time.Minute},
		{at: 50 * time.Second, gpu: changing, want: -1},
		{at: 70 * time.Second, gpu: idle, want: 70 * time.Second, wantWake: time.Minute},
		// Whole already: idle, but nothing to wake for.
		{at: 80 * time.Second, gpu: whole, want: 70 * time.Second},
		{at: 90 * time.Second, gpu: inUse, want: -1},
		// Seen busy: its agent's older count (a pod that came and went
		// between two of its passes) is not taken.
		{at: 100 * time.Second, gpu: agentIdleSince(idle, t0), want: 100 * time.Second, wantWake: time.Minute},
	}
	for _, s := range steps {
		snap := snapAt(t0.Add(s.at), s.gpu)
		wake := tr.mark(&snap)
		got := snap.Nodes[0].GPUs[0].IdleSince
		switch {
		case s.want < 0 && !got.IsZero():
			t.Errorf("at %s: IdleSince %s, want none", s.at, got)
		case s.want >= 0 && !got.Equal(t0.Add(s.want)):
			t.Errorf("at %s: IdleSince %s, want %s", s.at, got, t0.Add(s.want))
		}
		if wake != s.wantWake {
			t.Errorf("at %s: wake in %s, want %s", s.at, wake, s.wantWake)
		}
	}
}

// TestReclaimAfterRestart: a controller that starts while a GPU has been
// idle for longer than the policy's time, by its agent's count
// (GPUStatus.IdleSince), gives it back whole at its first plan rather than
// counting afresh; a GPU its agent has seen idle only briefly waits.
func TestReclaimAfterRestart(t *testing.T) {
	for name, tc := range map[string]struct {
		idleFor time.Duration
		want    map[int32]string
	}{
		"idle for an hour by its agent":  {idleFor: time.Hour, want: map[int32]string{0: "7g.80gb@0"}},
		"idle for a second by its agent": {idleFor: time.Second, want: map[int32]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](300)})
			g := a100(0).layout("1g.10gb@0,2g.20gb@2,3g.40gb@4")
			// The harness's clock starts at 2026-01-01 00:00 UTC.
			since := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-tc.idleFor))
			g.g.UUID, g.g.IdleSince = "GPU-0", &since
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, g))
			h.settle()
			if diff := cmp.Diff(tc.want, h.specOf("n1")); diff != "" {
				t.Errorf("spec after the first plan (-want +got):\n%s", diff)
			}
		})
	}
}

// agentIdleSince is g with its agent's GPUStatus.IdleSince, as autoGPUs
// sets it before the idleTracker marks it.
func agentIdleSince(g planner.GPU, since time.Time) planner.GPU {
	g.IdleSince = since
	return g
}

// TestIdleTrackerWakesForTheFirstDue: two idle GPUs fall due at different
// times (their nodes' policies give them back after 1 and 3 minutes): the
// planner wakes for the first.
func TestIdleTrackerWakesForTheFirstDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	n := func(name string, after time.Duration) planner.Node {
		return planner.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, Policy: planner.Policy{ReclaimIdleAfter: after},
			GPUs: []planner.GPU{{Info: migslices.PlannedGPU(m, 0), Layout: mig.MustParseLayout("1g.10gb@0")}}}
	}
	snap := planner.Snapshot{Now: t0, Nodes: []planner.Node{n("n1", time.Minute), n("n2", 3*time.Minute)}}
	if wake := (idleTracker{}).mark(&snap); wake != time.Minute {
		t.Errorf("wake in %s, want 1m0s (n1's GPU falls due first)", wake)
	}
}

// TestIdleTrackerIgnoresAFutureAgentCount: a controller that starts while
// an agent reports a GPU idle since a time ahead of the controller's clock
// (clock skew) counts from now, not from that time.
func TestIdleTrackerIgnoresAFutureAgentCount(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := planner.GPU{Info: migslices.PlannedGPU(m, 0), Layout: mig.MustParseLayout("1g.10gb@0"), IdleSince: t0.Add(time.Hour)}
	snap := planner.Snapshot{Now: t0, Nodes: []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		Policy: planner.Policy{ReclaimIdleAfter: time.Minute}, GPUs: []planner.GPU{g}}}}
	wake := (idleTracker{}).mark(&snap)
	if got := snap.Nodes[0].GPUs[0].IdleSince; !got.Equal(t0) || wake != time.Minute {
		t.Errorf("IdleSince %s, wake in %s; want %s and 1m0s (the agent's count is ahead of now)", got, wake, t0)
	}
}

// a100GPU is GPU 0 of a node, an A100-SXM4-80GB holding layout (free
// devices: nothing pinned, shared or changing).
func a100GPU(t *testing.T, layout string) planner.GPU {
	t.Helper()
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return planner.GPU{Info: migslices.PlannedGPU(m, 0), Layout: mig.MustParseLayout(layout)}
}

// reclaimingNode is the Auto node name with gpus, whose policy gives a GPU
// idle for a minute back whole.
func reclaimingNode(name string, gpus ...planner.GPU) planner.Node {
	return planner.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
		Policy: planner.Policy{ReclaimIdleAfter: time.Minute}, GPUs: gpus}
}
