package fullstack

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
	"github.com/miglayout/miglayout/test/kubelet"
)

// Issue 4's scenarios on two nodes (static-a100: 2x A100, static-h100: 1x H100) selected
// by MigLayout e2e-static, plus the drain race on race-a100. Every test starts from the
// base layout (setStatic) so that each can run alone.

const staticLayout = "e2e-static"

var staticNodes = map[string]string{groupLabel: "static"}

// The base layout: A100s in halves, the H100 mixed.
var (
	a100Halves = clustertest.Rule("a100", a100, map[string]int32{"3g.40gb": 2})
	h100Mixed  = clustertest.Rule("h100", h100, map[string]int32{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
)

// setStatic applies the base layout and waits until both nodes hold it.
func setStatic(t *testing.T, ctx context.Context) *v1alpha1.MigLayout {
	t.Helper()
	ml := env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes, a100Halves, h100Mixed)
	ml = env.WaitReady(t, ctx, ml, 2)
	for _, n := range []string{nodeA, nodeH} {
		env.WaitPoolMatchesNVML(t, ctx, n)
	}
	return ml
}

func TestStaticLayoutOnTwoNodes(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ml := env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes, a100Halves, h100Mixed)

	// The controller creates one NodeMigLayout per selected node, owned by the MigLayout,
	// with a desired layout per GPU from the rules and the agent-reported inventory.
	for node, gpus := range map[string]int{nodeA: 2, nodeH: 1} {
		clustertest.Poll(t, ctx, 60*time.Second, "NodeMigLayout "+node+" with a desired layout per GPU", func(ctx context.Context) (bool, string) {
			var nml v1alpha1.NodeMigLayout
			if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: node}, &nml); err != nil {
				return false, err.Error()
			}
			owner := metav1.GetControllerOf(&nml)
			return nml.Spec.MigLayout == staticLayout && len(nml.Spec.GPUs) == gpus && owner != nil && owner.Name == staticLayout,
				fmt.Sprintf("spec %+v, owner %+v", nml.Spec, owner)
		})
	}
	ml = env.WaitReady(t, ctx, ml, 2)

	// NVML (the simulator) holds the layouts.
	stA, stH := env.Snapshot(t, nodeA), env.Snapshot(t, nodeH)
	if got, want := clustertest.Layouts(stA), []string{"3g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("%s layouts = %v, want %v", nodeA, got, want)
	}
	if got, want := profileCounts(stH.GPUs[0]), "1g.10gb:2,2g.20gb:1,3g.40gb:1"; got != want {
		t.Errorf("%s GPU 0 holds %s (%s), want %s", nodeH, got, stH.GPUs[0].Layout(), want)
	}
	// Each NodeMigLayout reports the actual layout, equal to the desired one, Ready.
	for node, st := range map[string]nvmlsim.State{nodeA: stA, nodeH: stH} {
		nml := env.GetNodeMigLayout(t, ctx, node)
		for _, spec := range nml.Spec.GPUs {
			var status *v1alpha1.GPUStatus
			for i := range nml.Status.GPUs {
				if nml.Status.GPUs[i].Index == spec.Index {
					status = &nml.Status.GPUs[i]
				}
			}
			actual := gpuOf(st, int(spec.Index)).Layout().String()
			switch {
			case status == nil:
				t.Errorf("%s: no status for GPU %d", node, spec.Index)
			case status.Phase != v1alpha1.PhaseReady || status.Layout != spec.Layout || spec.Layout != actual:
				t.Errorf("%s GPU %d: desired %q, reported %q (%s), NVML %q", node, spec.Index, spec.Layout, status.Layout, status.Phase, actual)
			}
		}
		if !clustertest.HasCondition(nml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue, "") {
			t.Errorf("NodeMigLayout %s not Ready: %s", node, clustertest.ConditionsString(nml.Status.Conditions))
		}
		// The pool was republished from NVML truth (invariant 2).
		env.WaitPoolMatchesNVML(t, ctx, node)
	}
	// The MigLayout has a row per node, with per-GPU desired and actual layouts.
	if len(ml.Status.Nodes) != 2 {
		t.Fatalf("MigLayout rows: %+v", ml.Status.Nodes)
	}
	for _, row := range ml.Status.Nodes {
		for _, g := range row.GPUs {
			if g.Desired != g.Actual || g.Phase != v1alpha1.PhaseReady {
				t.Errorf("row %s GPU %d: desired %q actual %q phase %s", row.Node, g.Index, g.Desired, g.Actual, g.Phase)
			}
		}
	}
	out := describe(t, ctx, "miglayout", staticLayout)
	for _, want := range []string{nodeA, nodeH, "3g.40gb@0,3g.40gb@4", "AllNodesReady"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe miglayout %s lacks %q:\n%s", staticLayout, want, out)
		}
	}
}

// TestLayoutChangeKeepsAllocatedDevice: a layout change keeps the device a running pod
// holds in place, whether a process runs on it or not (an idle pod: then nothing in
// NVML refuses its destruction, and only the agent's allocation and preparation checks
// keep it).
func TestLayoutChangeKeepsAllocatedDevice(t *testing.T) {
	for _, idle := range []bool{false, true} {
		t.Run(map[bool]string{false: "a process on the device", true: "an idle pod"}[idle], func(t *testing.T) {
			testLayoutChangeKeepsAllocatedDevice(t, idle)
		})
	}
}

func testLayoutChangeKeepsAllocatedDevice(t *testing.T, idle bool) {
	ctx := clustertest.Context(t, 4*time.Minute)
	setStatic(t, ctx)
	ns := env.NewNamespace(t, ctx, "keep")

	// A pod on static-a100 holds one 3g.40gb device.
	claim := env.CreateClaim(t, ctx, ns, "keep", `device.attributes['mig.miglayout.io'].profile == '3g.40gb'`)
	pod := clustertest.Pod(ns, "keep", clustertest.OnNode(nodeA), claim.Name, "")
	if idle {
		pod.Labels = map[string]string{kubelet.IdleLabel: "true"}
	}
	env.CreatePod(t, ctx, pod)
	env.WaitPodRunning(t, ctx, ns, "keep", 60*time.Second)
	pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "keep"))
	if !ok || pool != nodeA {
		t.Fatalf("claim allocated from pool %q device %q, want a device of %s", pool, dev, nodeA)
	}
	before := env.Snapshot(t, nodeA)
	uuid := clustertest.NVMLDevices(before)[dev]
	if uuid == "" || (len(clustertest.ProcessesOn(before, uuid)) == 0) != idle {
		t.Fatalf("device %s (uuid %q): processes %+v, want the pod's process only where it is not idle (idle %t)", dev, uuid, before.Processes, idle)
	}
	gpuIdx, _, _ := migslices.DeviceGPUIndex(dev)
	t.Logf("claim holds %s (%s) on GPU %d; layouts before: %v", dev, uuid, gpuIdx, clustertest.Layouts(before))

	// Every A100 gets 3g.40gb + 2g.20gb + 1g.10gb (which fits around a 3g.40gb at either
	// placement), the H100 7x 1g.10gb.
	ml := env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes,
		clustertest.Rule("a100", a100, map[string]int32{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
		clustertest.Rule("h100", h100, map[string]int32{"1g.10gb": 7}))
	env.WaitReady(t, ctx, ml, 2)

	after := env.Snapshot(t, nodeA)
	t.Logf("layouts after: %v", clustertest.Layouts(after))
	// The allocated device survived: same name (profile and placement), same UUID, its
	// process still running.
	if got := clustertest.NVMLDevices(after)[dev]; got != uuid {
		t.Errorf("device %s has uuid %q after the change, want %q (kept in place)", dev, got, uuid)
	}
	if !idle && len(clustertest.ProcessesOn(after, uuid)) == 0 {
		t.Errorf("the pod's process on %s is gone", uuid)
	}
	// The rest changed.
	for _, g := range after.GPUs {
		if got, want := profileCounts(g), "1g.10gb:1,2g.20gb:1,3g.40gb:1"; got != want {
			t.Errorf("%s GPU %d holds %s (%s), want %s", nodeA, g.Index, got, g.Layout(), want)
		}
	}
	if got, want := profileCounts(env.Snapshot(t, nodeH).GPUs[0]), "1g.10gb:7"; got != want {
		t.Errorf("%s GPU 0 holds %s, want %s", nodeH, got, want)
	}
	env.WaitPoolMatchesNVML(t, ctx, nodeA)
	env.WaitPoolMatchesNVML(t, ctx, nodeH)
	if _, d, _ := clustertest.Allocated(env.GetClaim(t, ctx, ns, "keep")); d != dev {
		t.Errorf("claim now allocated %q, want %q", d, dev)
	}
	env.WaitPodRunning(t, ctx, ns, "keep", 60*time.Second)
}

func TestImpossibleLayoutLeavesHardwareAlone(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	setStatic(t, ctx)
	beforeA, beforeH := env.Snapshot(t, nodeA), env.Snapshot(t, nodeH)

	// Two 3g.40gb take all eight memory slices of an A100: no room for a
	// 1g.10gb (admitted: seven compute slices).
	ml := env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes,
		clustertest.Rule("a100", a100, map[string]int32{"3g.40gb": 2, "1g.10gb": 1}), h100Mixed)
	got := env.WaitMigLayout(t, ctx, staticLayout, ml.Generation, 60*time.Second, "Degraded with reason InvalidLayout", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonInvalidLayout)
	})
	deg := clustertest.Condition(got.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", deg.Reason, deg.Message)
	if !strings.Contains(deg.Message, "3g.40gb") {
		t.Errorf("Degraded message does not name the profile: %q", deg.Message)
	}
	waitEvent(t, ctx, staticLayout, v1alpha1.ReasonInvalidLayout)

	// The hardware is not touched, for several settle periods.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if a := env.Snapshot(t, nodeA); !reflect.DeepEqual(a.GPUs, beforeA.GPUs) {
			t.Fatalf("%s changed: %v → %v", nodeA, clustertest.Layouts(beforeA), clustertest.Layouts(a))
		}
		if h := env.Snapshot(t, nodeH); !reflect.DeepEqual(h.GPUs, beforeH.GPUs) {
			t.Fatalf("%s changed: %v → %v", nodeH, clustertest.Layouts(beforeH), clustertest.Layouts(h))
		}
		time.Sleep(200 * time.Millisecond)
	}
	env.WaitPoolMatchesNVML(t, ctx, nodeA)
}

func TestOverlappingMigLayoutsConflict(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	setStatic(t, ctx)
	before := env.Snapshot(t, nodeH)
	const other = "e2e-overlap"
	t.Cleanup(func() { env.DeleteMigLayout(t, other) })
	ml2 := env.SetStaticMigLayout(t, ctx, other, clustertest.OnNode(nodeH), clustertest.Rule("whole", h100, map[string]int32{"7g.80gb": 1}))
	isConflict := func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOverlappingSelectors)
	}
	env.WaitMigLayout(t, ctx, other, ml2.Generation, 60*time.Second, "Conflict", isConflict)
	env.WaitMigLayout(t, ctx, staticLayout, 0, 60*time.Second, "Conflict", isConflict)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if h := env.Snapshot(t, nodeH); !reflect.DeepEqual(h.GPUs, before.GPUs) {
			t.Fatalf("%s changed under conflicting MigLayouts: %v → %v", nodeH, clustertest.Layouts(before), clustertest.Layouts(h))
		}
		time.Sleep(200 * time.Millisecond)
	}
	env.DeleteMigLayout(t, other)
	env.WaitMigLayout(t, ctx, staticLayout, 0, 60*time.Second, "no Conflict, Ready", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionConflict, metav1.ConditionFalse, "") &&
			clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue, "")
	})
}

// TestAgentKilledMidRepartition kills the agent (SIGKILL) at the two moments NVML holds a
// GPU instance without its compute instance, and checks that the restarted agent rolls
// the orphan back and converges (invariant 4).
func TestAgentKilledMidRepartition(t *testing.T) {
	t.Run("between GI create and CI create", func(t *testing.T) {
		testAgentKilled(t, func(before, now nvmlsim.GPU, gi nvmlsim.GPUInstance) bool {
			return !before.Layout().Contains(mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}) // a new GI
		})
	})
	t.Run("between CI destroy and GI destroy", func(t *testing.T) {
		testAgentKilled(t, func(before, now nvmlsim.GPU, gi nvmlsim.GPUInstance) bool {
			return before.Layout().Contains(mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}) // an old GI
		})
	})
}

// testAgentKilled alternates static-a100 between two layouts until KillAgentWhen catches
// the agent with a GPU instance that has no compute instance and that isWanted accepts
// (KillAgentWhen holds the simulator's lock between the agent's NVML calls; a rare miss
// is retried with the other layout), then restarts the agent.
func testAgentKilled(t *testing.T, isWanted func(before, now nvmlsim.GPU, gi nvmlsim.GPUInstance) bool) {
	ctx := clustertest.Context(t, 5*time.Minute)
	setStatic(t, ctx)
	targets := []map[string]int32{{"1g.10gb": 7}, {"3g.40gb": 2}}
	var (
		ml     *v1alpha1.MigLayout
		target map[string]int32
		caught string
		found  bool
	)
	for attempt := 0; attempt < 6 && !found; attempt++ {
		target = targets[attempt%2]
		before := env.Snapshot(t, nodeA)
		ml = env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes, clustertest.Rule("a100", a100, target), h100Mixed)
		kctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		want := fmt.Sprint(target)
		_, err := env.Cluster.KillAgentWhen(kctx, nodeA, func(st nvmlsim.State) bool {
			done := true
			for _, g := range st.GPUs {
				for _, gi := range g.GPUInstances {
					if len(gi.ComputeInstances) == 0 && isWanted(gpuOf(before, g.Index), g, gi) {
						caught = fmt.Sprintf("GPU %d: GI %d %s@%d without a compute instance, layouts %v",
							g.Index, gi.ID, gi.Profile, gi.Placement.Start, clustertest.Layouts(st))
						return true
					}
				}
				done = done && fmt.Sprint(g.Layout().Counts()) == want
			}
			if done {
				cancel() // converged: missed this time
			}
			return false
		})
		cancel()
		if err == nil {
			found = true
			break
		}
		t.Logf("attempt %d: not caught (%v); trying the other layout", attempt, err)
		env.WaitReady(t, ctx, ml, 2)
	}
	if !found {
		t.Fatal("never caught the agent at that moment")
	}
	t.Logf("agent killed with %s", caught)
	if pid := env.Cluster.AgentPid(nodeA); pid != 0 {
		t.Fatalf("agent still running (pid %d)", pid)
	}
	// Nothing else touches the hardware meanwhile: the orphan is still there.
	if _, ok := orphanGI(env.Snapshot(t, nodeA)); !ok {
		t.Fatalf("the orphan GI vanished before the restart")
	}

	if err := env.Cluster.StartAgent(ctx, nodeA); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 2)
	after := env.Snapshot(t, nodeA)
	if what, ok := orphanGI(after); ok {
		t.Errorf("leaked after restart: %s", what)
	}
	for _, g := range after.GPUs {
		if got, want := fmt.Sprint(g.Layout().Counts()), fmt.Sprint(target); got != want {
			t.Errorf("GPU %d holds %s after the restart, want %s", g.Index, got, want)
		}
	}
	env.WaitPoolMatchesNVML(t, ctx, nodeA)
}

func TestDrainTaintStopsAllocation(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-race"
	selector := map[string]string{groupLabel: "race"}
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeRace)
	ns := env.NewNamespace(t, ctx, "race")

	// Repartition to 7x 1g.10gb: both 3g.40gb devices are drained (tainted for the
	// agent's 3 s settle period on this node), then destroyed.
	ml = env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("sevenths", a100, map[string]int32{"1g.10gb": 7}))
	clustertest.Poll(t, ctx, 30*time.Second, "the drain taint on "+nodeRace, func(ctx context.Context) (bool, string) {
		devs, err := env.PoolDevices(ctx, nodeRace)
		if err != nil {
			return false, err.Error()
		}
		for _, d := range devs {
			if d.Tainted {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d devices, none tainted", len(devs))
	})

	// Meanwhile, claims for any MIG device of this node keep coming (one pod each).
	const claims = 7
	duringDrain := 0
	for i := range claims {
		devs, err := env.PoolDevices(ctx, nodeRace)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			if d.Tainted {
				duringDrain++
				break
			}
		}
		name := fmt.Sprintf("race-%d", i)
		c := env.CreateClaim(t, ctx, ns, name, "")
		env.CreatePod(t, ctx, clustertest.Pod(ns, name, clustertest.OnNode(nodeRace), c.Name, ""))
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("%d of %d claims created while the pool showed the drain taint", duringDrain, claims)
	if duringDrain == 0 {
		t.Fatal("no claim was created during the drain; the test proved nothing")
	}

	// The drain was not disturbed (no claim got a draining device, which would have
	// blocked the GPU), and every claim got one of the new devices.
	env.WaitReady(t, ctx, ml, 1)
	for i := range claims {
		env.WaitPodRunning(t, ctx, ns, fmt.Sprintf("race-%d", i), 60*time.Second)
	}
	st := env.Snapshot(t, nodeRace)
	devices := clustertest.NVMLDevices(st)
	seen := map[string]bool{}
	for i := range claims {
		c := env.GetClaim(t, ctx, ns, fmt.Sprintf("race-%d", i))
		_, dev, ok := clustertest.Allocated(c)
		uuid, exists := devices[dev]
		switch {
		case !ok:
			t.Errorf("claim %s not allocated", c.Name)
		case !exists:
			t.Errorf("claim %s is allocated %s, which no longer exists (NVML has %v)", c.Name, dev, clustertest.Layouts(st))
		case !strings.Contains(dev, "-mig-1g10gb-"):
			t.Errorf("claim %s got %s, not one of the new 1g.10gb devices", c.Name, dev)
		case seen[dev]:
			t.Errorf("device %s allocated twice", dev)
		case len(clustertest.ProcessesOn(st, uuid)) == 0:
			t.Errorf("claim %s: no process on %s (%s)", c.Name, dev, uuid)
		}
		seen[dev] = true
	}
	env.WaitPoolMatchesNVML(t, ctx, nodeRace)
}

// waitEvent waits for an event with the given reason about the MigLayout.
func waitEvent(t *testing.T, ctx context.Context, mlName, reason string) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, "event "+reason+" on MigLayout "+mlName, func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: "regarding.name=" + mlName})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "MigLayout" {
				return true, ""
			}
			reasons = append(reasons, e.Reason)
		}
		return false, "reasons seen: " + strings.Join(reasons, ",")
	})
}

// TestMaxNodesChangingOneNodeAtATime changes both nodes' rules under
// spec.maxNodesChanging: 1 and watches the rollout: the nodes change one after the other
// in name order (never both given the new layout while one has not reached it), the
// node held back says it waits its turn, and both end with the new layout, each step
// taken on the events the agents' reports make, with no other prompt.
func TestMaxNodesChangingOneNodeAtATime(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	setStatic(t, ctx)
	const whole = "7g.80gb@0"
	ml := env.SetMigLayout(t, ctx, staticLayout, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: staticNodes},
		Mode:         v1alpha1.ModeStatic,
		Rules: []v1alpha1.LayoutRule{clustertest.Rule("a100", a100, map[string]int32{"7g.80gb": 1}),
			clustertest.Rule("h100", h100, map[string]int32{"7g.80gb": 1})},
		MaxNodesChanging: ptr.To[int32](1),
	})
	// changing: given the new layout, not Ready on it yet.
	changing := func(nml *v1alpha1.NodeMigLayout) (given, done bool) {
		given, done = len(nml.Spec.GPUs) > 0, true
		for _, s := range nml.Spec.GPUs {
			given = given && s.Layout == whole
		}
		for _, s := range nml.Spec.GPUs {
			found := false
			for _, g := range nml.Status.GPUs {
				found = found || g.Index == s.Index && g.Phase == v1alpha1.PhaseReady && g.Layout == s.Layout
			}
			done = done && found
		}
		return given, given && done
	}
	var order []string
	heldSeen := false
	clustertest.Poll(t, ctx, 90*time.Second, "both nodes on the new layout, one at a time", func(ctx context.Context) (bool, string) {
		var state []string
		busy, finished := 0, 0
		for _, n := range []string{nodeA, nodeH} {
			var nml v1alpha1.NodeMigLayout
			if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: n}, &nml); err != nil {
				return false, err.Error()
			}
			given, done := changing(&nml)
			if given && !slices.Contains(order, n) {
				order = append(order, n)
			}
			switch {
			case done:
				finished++
			case given:
				busy++
			}
			state = append(state, fmt.Sprintf("%s given %t done %t", n, given, done))
		}
		if busy > 1 {
			t.Fatalf("both nodes changing at once under maxNodesChanging 1: %v", state)
		}
		var cur v1alpha1.MigLayout
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: staticLayout}, &cur); err == nil {
			for _, row := range cur.Status.Nodes {
				heldSeen = heldSeen || row.Node == nodeH && strings.Contains(row.Message, "waits its turn")
			}
		}
		return finished == 2, strings.Join(state, "; ")
	})
	if want := []string{nodeA, nodeH}; !reflect.DeepEqual(order, want) {
		t.Errorf("nodes given the new layout in the order %v, want %v (node name order)", order, want)
	}
	if !heldSeen {
		t.Errorf("%s's row never said it waits its turn while %s changed", nodeH, nodeA)
	}
	env.WaitReady(t, ctx, ml, 2)
	for _, n := range []string{nodeA, nodeH} {
		for _, g := range env.Snapshot(t, n).GPUs {
			if got := g.Layout().String(); got != whole {
				t.Errorf("%s GPU %d holds %s in NVML, want %s", n, g.Index, got, whole)
			}
		}
	}
}
