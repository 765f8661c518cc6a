package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/harness"
)

// TestController runs the MigLayout reconciler in-process (a controller-runtime
// manager against the real kube-apiserver) and plays the node agent by
// writing NodeMigLayout status by hand. The subtests run one after the other
// and use their own nodes and label values.
func TestController(t *testing.T) {
	c := miglayoutClient(t)
	startController(t)
	sfx := rand.String(5)
	t.Run("static layout on two nodes", func(t *testing.T) { testStaticTwoNodes(t, c, sfx) })
	t.Run("overlapping MigLayouts conflict and leave the node alone", func(t *testing.T) { testConflict(t, c, sfx) })
	t.Run("impossible rule is reported and not applied", func(t *testing.T) { testImpossibleRule(t, c, sfx) })
	t.Run("auto mode owns the NodeMigLayout and leaves its GPUs to the planner", func(t *testing.T) { testAutoMode(t, c, sfx) })
}

func startController(t *testing.T) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctrl.SetLogger(logger)
	mgr, err := ctrl.NewManager(cp.Config(), ctrl.Options{
		Scheme:                 miglayoutScheme(),
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controller.Reconciler{}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})
}

// ---- the scenarios ----

func testStaticTwoNodes(t *testing.T, c crclient.Client, sfx string) {
	ctx := testContext(t, 2*time.Minute)
	pool := "static-" + sfx
	nodes := createNodes(t, ctx, map[string]string{"miglayout.test/pool": pool}, "sa-"+sfx, "sb-"+sfx)
	nodeA, nodeB := nodes[0], nodes[1]
	ml := newMigLayout("static-"+sfx, "miglayout.test/pool", pool).
		rule(v1alpha1.LayoutRule{Name: "halves", ProductName: "A100-SXM4-80GB", Profiles: map[string]int32{"3g.40gb": 2}}).
		rule(v1alpha1.LayoutRule{Name: "h100-off", ProductName: "NVIDIA H100 80GB HBM3", MIGEnabled: ptr.To(false)}).
		create(t, ctx, c)

	// Before the agents report, the NodeMigLayouts exist, owned by the
	// MigLayout, with no GPU in their spec.
	for _, n := range []string{nodeA, nodeB} {
		nml := waitNodeMigLayout(t, ctx, c, n, "created with an empty spec", func(nml *v1alpha1.NodeMigLayout) bool { return true })
		if diff := cmp.Diff(v1alpha1.NodeMigLayoutSpec{MigLayout: ml.Name}, nml.Spec); diff != "" {
			t.Errorf("spec of %s before any report (-want +got):\n%s", n, diff)
		}
		if owner := metav1.GetControllerOf(nml); owner == nil || owner.Kind != "MigLayout" || owner.Name != ml.Name || owner.UID != ml.UID {
			t.Errorf("controller of %s = %+v, want MigLayout %s", n, owner, ml.Name)
		}
	}
	waitMigLayout(t, ctx, c, ml.Name, "waiting for the agents", func(s *v1alpha1.MigLayoutStatus) bool {
		return hasCondition(s, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAgentNotReporting) && s.SelectedNodes == 2
	})

	// The agents report their inventory: the desired layouts follow.
	reportGPUs(t, ctx, c, nodeA, agentA100(0, "", v1alpha1.PhaseReady), agentH100(1, "7g.80gb@0", v1alpha1.PhaseReady))
	reportGPUs(t, ctx, c, nodeB, agentA100(0, "7g.80gb@0", v1alpha1.PhaseReady))
	// Each entry names the GPU it is for (the UUID the agent reports).
	halves := v1alpha1.GPUSpec{Index: 0, UUID: "GPU-a100-0", MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: `rule "halves": profiles 3g.40gb:2`}
	off := v1alpha1.GPUSpec{Index: 1, UUID: "GPU-h100-1", MIGEnabled: false, Reason: `rule "h100-off": MIG off`}
	waitSpec(t, ctx, c, nodeA, halves, off)
	waitSpec(t, ctx, c, nodeB, halves)
	waitMigLayout(t, ctx, c, ml.Name, "both nodes progressing", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.ProgressingNodes == 2 && hasCondition(s, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonRepartitioning)
	})

	// Node A gets there; node B is blocked by a device in use.
	reportGPUs(t, ctx, c, nodeA, agentA100(0, "3g.40gb@0,3g.40gb@4", v1alpha1.PhaseReady), agentH100(1, "", v1alpha1.PhaseReady).migOff())
	blocked := agentA100(0, "7g.80gb@0", v1alpha1.PhaseBlocked)
	blocked.Reason, blocked.Message, blocked.InUse = v1alpha1.ReasonDeviceInUse, "7g.80gb@0 is allocated to claim e2e/train", "7g.80gb@0"
	reportGPUs(t, ctx, c, nodeB, blocked)
	st := waitMigLayout(t, ctx, c, ml.Name, "A ready, B blocked", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.ReadyNodes == 1 && s.FailedNodes == 1 && hasCondition(s, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDeviceInUse)
	})
	if len(st.Nodes) != 2 || st.Nodes[0].Node != nodeB || st.Nodes[0].Phase != v1alpha1.PhaseBlocked {
		t.Errorf("rows: want the blocked node %s first, got %+v", nodeB, st.Nodes)
	}
	// The agent keeps the device in use; the spec still asks for the halves
	// and says that they destroy the device in use (not hidden).
	inUse := halves
	inUse.Reason += "; destroys 7g.80gb@0, in use now"
	waitSpec(t, ctx, c, nodeB, inUse)

	// Node B gets there too.
	reportGPUs(t, ctx, c, nodeB, agentA100(0, "3g.40gb@4,3g.40gb@0", v1alpha1.PhaseReady))
	st = waitMigLayout(t, ctx, c, ml.Name, "all ready", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.ReadyNodes == 2 && hasCondition(s, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesReady)
	})
	wantRows := []v1alpha1.NodeRow{
		{Node: nodeA, Phase: v1alpha1.PhaseReady, GPUs: []v1alpha1.GPURow{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady},
			{Index: 1, Product: "NVIDIA H100 80GB HBM3", Desired: "-", Actual: "-", Phase: v1alpha1.PhaseReady},
		}},
		{Node: nodeB, Phase: v1alpha1.PhaseReady, GPUs: []v1alpha1.GPURow{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "3g.40gb@4,3g.40gb@0", Phase: v1alpha1.PhaseReady},
		}},
	}
	if diff := cmp.Diff(wantRows, st.Nodes); diff != "" {
		t.Errorf("node rows (-want +got):\n%s", diff)
	}
	for _, typ := range []string{v1alpha1.ConditionProgressing, v1alpha1.ConditionDegraded, v1alpha1.ConditionConflict} {
		if cnd := meta.FindStatusCondition(st.Conditions, typ); cnd == nil || cnd.Status != metav1.ConditionFalse {
			t.Errorf("condition %s = %+v, want False", typ, cnd)
		}
	}
	waitEvents(t, ctx, c, ml.Name,
		eventWant{corev1.EventTypeWarning, controller.EventBlocked, nodeB + " gpu 0 is blocked (DeviceInUse)"},
		eventWant{corev1.EventTypeNormal, controller.EventRepartitioned, "node " + nodeA + " holds the desired layout"},
		eventWant{corev1.EventTypeNormal, controller.EventRepartitioned, "node " + nodeB + " holds the desired layout"},
	)

	// A node that loses the label is released: its NodeMigLayout goes.
	relabelNode(t, ctx, nodeB, "miglayout.test/pool", "elsewhere")
	waitGone(t, ctx, c, nodeB)
	waitMigLayout(t, ctx, c, ml.Name, "one node left", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.SelectedNodes == 1 && s.ReadyNodes == 1
	})
}

func testConflict(t *testing.T, c crclient.Client, sfx string) {
	ctx := testContext(t, 2*time.Minute)
	pool, team := "conflict-"+sfx, "team-"+sfx
	node := createNodes(t, ctx, map[string]string{"miglayout.test/pool": pool, "miglayout.test/team": team}, "cf-"+sfx)[0]
	first := newMigLayout("first-"+sfx, "miglayout.test/pool", pool).
		rule(v1alpha1.LayoutRule{Name: "halves", Profiles: map[string]int32{"3g.40gb": 2}}).create(t, ctx, c)
	waitNodeMigLayout(t, ctx, c, node, "created", func(*v1alpha1.NodeMigLayout) bool { return true })
	reportGPUs(t, ctx, c, node, agentA100(0, "7g.80gb@0", v1alpha1.PhaseReady))
	halves := v1alpha1.GPUSpec{Index: 0, UUID: "GPU-a100-0", MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: `rule "halves": profiles 3g.40gb:2`}
	waitSpec(t, ctx, c, node, halves)

	second := newMigLayout("second-"+sfx, "miglayout.test/team", team).
		rule(v1alpha1.LayoutRule{Name: "sevenths", Profiles: map[string]int32{"1g.10gb": 7}}).create(t, ctx, c)
	for _, p := range [][2]string{{first.Name, second.Name}, {second.Name, first.Name}} {
		st := waitMigLayout(t, ctx, c, p[0], "Conflict", func(s *v1alpha1.MigLayoutStatus) bool {
			return hasCondition(s, v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOverlappingSelectors)
		})
		msg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict).Message
		if want := fmt.Sprintf("MigLayout %q also selects node %s", p[1], node); !strings.Contains(msg, want) {
			t.Errorf("Conflict message of %s = %q, want it to contain %q", p[0], msg, want)
		}
		waitEvents(t, ctx, c, p[0], eventWant{corev1.EventTypeWarning, controller.EventConflict, p[1]})
	}
	// The node is left as it is: the change first wrote, which the agent
	// has not begun (the GPU Ready on 7g.80gb@0), is dropped, with why.
	// Give the controller time to (wrongly) touch the node again, then
	// check that it did not: same object, same owner, same spec.
	dropped := waitSpec(t, ctx, c, node, v1alpha1.GPUSpec{Index: 0, UUID: "GPU-a100-0", MIGEnabled: true, Layout: "7g.80gb@0",
		Reason: "another MigLayout selects the node too: the change to 3g.40gb@0,3g.40gb@4 was dropped before it started"})
	time.Sleep(2 * time.Second)
	after := getNodeMigLayout(t, ctx, c, node)
	if after.ResourceVersion != dropped.ResourceVersion {
		t.Errorf("NodeMigLayout %s was written again during the conflict: resourceVersion %s -> %s, spec %+v",
			node, dropped.ResourceVersion, after.ResourceVersion, after.Spec)
	}
	if owner := metav1.GetControllerOf(after); owner == nil || owner.Name != first.Name {
		t.Errorf("controller of %s = %+v, want MigLayout %s", node, owner, first.Name)
	}

	// The conflict ends with the second MigLayout: the first one's rules
	// decide the node again.
	if err := c.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitMigLayout(t, ctx, c, first.Name, "no more conflict", func(s *v1alpha1.MigLayoutStatus) bool {
		return hasCondition(s, v1alpha1.ConditionConflict, metav1.ConditionFalse, v1alpha1.ReasonNoConflict)
	})
	waitSpec(t, ctx, c, node, halves)
}

func testImpossibleRule(t *testing.T, c crclient.Client, sfx string) {
	ctx := testContext(t, 2*time.Minute)
	pool := "impossible-" + sfx
	node := createNodes(t, ctx, map[string]string{"miglayout.test/pool": pool}, "im-"+sfx)[0]
	ml := newMigLayout("impossible-"+sfx, "miglayout.test/pool", pool).
		// Seven compute slices (admitted), nine memory slices of eight.
		rule(v1alpha1.LayoutRule{Name: "halves-and-one", ProductName: "A100-SXM4-80GB", Profiles: map[string]int32{"3g.40gb": 2, "1g.10gb": 1}}).
		rule(v1alpha1.LayoutRule{Name: "h100-whole", Profiles: map[string]int32{"7g.80gb": 1}}).
		create(t, ctx, c)
	waitNodeMigLayout(t, ctx, c, node, "created", func(*v1alpha1.NodeMigLayout) bool { return true })
	reportGPUs(t, ctx, c, node, agentA100(0, "1g.10gb@0", v1alpha1.PhaseReady), agentH100(1, "", v1alpha1.PhaseReady))

	// GPU 0 is left out of the spec (its hardware is not touched); GPU 1
	// gets its layout.
	waitSpec(t, ctx, c, node, v1alpha1.GPUSpec{Index: 1, UUID: "GPU-h100-1", MIGEnabled: true, Layout: "7g.80gb@0", Reason: `rule "h100-whole": profiles 7g.80gb:1`})
	st := waitMigLayout(t, ctx, c, ml.Name, "Degraded InvalidLayout", func(s *v1alpha1.MigLayoutStatus) bool {
		return hasCondition(s, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonInvalidLayout) && s.FailedNodes == 1
	})
	msg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded).Message
	for _, want := range []string{"node " + node + " gpu 0", `rule "halves-and-one"`, "3g.40gb"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Degraded message %q does not contain %q", msg, want)
		}
	}
	if len(st.Nodes) != 1 || len(st.Nodes[0].GPUs) != 2 || st.Nodes[0].GPUs[0].Phase != v1alpha1.PhaseFailed {
		t.Errorf("rows: want GPU 0 Failed, got %+v", st.Nodes)
	}
	waitEvents(t, ctx, c, ml.Name, eventWant{corev1.EventTypeWarning, controller.EventInvalidLayout, `rule "halves-and-one"`})
}

func testAutoMode(t *testing.T, c crclient.Client, sfx string) {
	ctx := testContext(t, time.Minute)
	pool := "auto-" + sfx
	node := createNodes(t, ctx, map[string]string{"miglayout.test/pool": pool}, "au-"+sfx)[0]
	ml := newMigLayout("auto-"+sfx, "miglayout.test/pool", pool).auto().create(t, ctx, c)
	waitMigLayout(t, ctx, c, ml.Name, "AgentNotReporting", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.SelectedNodes == 1 && hasCondition(s, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAgentNotReporting)
	})
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, crclient.ObjectKey{Name: node}, &nml); err != nil {
		t.Fatalf("NodeMigLayout %s in Auto mode: %v", node, err)
	}
	if !metav1.IsControlledBy(&nml, ml) || len(nml.Spec.GPUs) != 0 {
		t.Errorf("NodeMigLayout %s: owner %v, %d GPUs in spec; want owned by %s with no GPU until the planner writes one", node, nml.OwnerReferences, len(nml.Spec.GPUs), ml.Name)
	}

	// A layout the planner wrote (as it writes it: the annotation says
	// Auto) is the MigLayout's, once the agent reports the GPU holding
	// it: the controller leaves it as it is (Static mode, with no rule,
	// would take the GPU out of the spec).
	// The planner names the GPU it planned for (the agent reports GPU 0
	// as GPU-a100-0).
	planned := v1alpha1.GPUSpec{Index: 0, UUID: "GPU-a100-0", MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "serves 1 pending pod(s): default/p"}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"gpus":[{"index":0,"uuid":%q,"migEnabled":true,"layout":%q,"reason":%q}]}}`,
		v1alpha1.AnnotationSpecWrittenBy, v1alpha1.ModeAuto, planned.UUID, planned.Layout, planned.Reason)
	if err := c.Patch(ctx, &nml, crclient.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("writing NodeMigLayout %s's spec as the planner does: %v", node, err)
	}
	reportGPUs(t, ctx, c, node, agentA100(0, planned.Layout, v1alpha1.PhaseReady))
	waitMigLayout(t, ctx, c, ml.Name, "the node Ready", func(s *v1alpha1.MigLayoutStatus) bool {
		return s.ReadyNodes == 1 && hasCondition(s, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesReady)
	})
	got := getNodeMigLayout(t, ctx, c, node)
	if diff := cmp.Diff([]v1alpha1.GPUSpec{planned}, got.Spec.GPUs); diff != "" {
		t.Errorf("spec.gpus of %s, which the planner wrote (-want +got):\n%s", node, diff)
	}
	if by := got.Annotations[v1alpha1.AnnotationSpecWrittenBy]; by != string(v1alpha1.ModeAuto) {
		t.Errorf("NodeMigLayout %s's spec written by %q, want %s", node, by, v1alpha1.ModeAuto)
	}
}

// ---- builders and helpers ----

type migLayoutBuilder struct{ ml *v1alpha1.MigLayout }

func newMigLayout(name, key, value string) *migLayoutBuilder {
	return &migLayoutBuilder{&v1alpha1.MigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MigLayoutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
			Mode:         v1alpha1.ModeStatic,
		},
	}}
}

func (b *migLayoutBuilder) rule(r v1alpha1.LayoutRule) *migLayoutBuilder {
	b.ml.Spec.Rules = append(b.ml.Spec.Rules, r)
	return b
}

func (b *migLayoutBuilder) auto() *migLayoutBuilder {
	b.ml.Spec.Mode = v1alpha1.ModeAuto
	return b
}

func (b *migLayoutBuilder) create(t *testing.T, ctx context.Context, c crclient.Client) *v1alpha1.MigLayout {
	t.Helper()
	if err := c.Create(ctx, b.ml); err != nil {
		t.Fatalf("creating MigLayout %s: %v", b.ml.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Delete(ctx, b.ml)
	})
	return b.ml
}

type agentGPU struct{ v1alpha1.GPUStatus }

func agentA100(index int32, layout string, phase v1alpha1.GPUPhase) *agentGPU {
	return &agentGPU{v1alpha1.GPUStatus{
		Index: index, UUID: fmt.Sprintf("GPU-a100-%d", index), Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
		MIGEnabled: true, MIGPending: true, Layout: layout, Phase: phase,
	}}
}

func agentH100(index int32, layout string, phase v1alpha1.GPUPhase) *agentGPU {
	return &agentGPU{v1alpha1.GPUStatus{
		Index: index, UUID: fmt.Sprintf("GPU-h100-%d", index), Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
		MIGEnabled: true, MIGPending: true, Layout: layout, Phase: phase,
	}}
}

func (g *agentGPU) migOff() *agentGPU {
	g.MIGEnabled, g.MIGPending, g.Layout = false, false, ""
	return g
}

func createNodes(t *testing.T, ctx context.Context, labels map[string]string, names ...string) []string {
	t.Helper()
	for _, n := range names {
		if _, err := harness.CreateNode(ctx, client, n, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		})
	}
	return names
}

func relabelNode(t *testing.T, ctx context.Context, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("relabelling node %s: %v", name, err)
	}
}

// reportGPUs plays the node agent: it writes the NodeMigLayout's status.
func reportGPUs(t *testing.T, ctx context.Context, c crclient.Client, node string, gpus ...*agentGPU) {
	t.Helper()
	now := metav1.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		nml := &v1alpha1.NodeMigLayout{}
		if err := c.Get(ctx, crclient.ObjectKey{Name: node}, nml); err != nil {
			return false, err
		}
		nml.Status.GPUs = nil
		for _, g := range gpus {
			s := g.GPUStatus
			s.LastTransitionTime = &now
			nml.Status.GPUs = append(nml.Status.GPUs, s)
		}
		nml.Status.ObservedGeneration = nml.Generation
		err := c.Status().Update(ctx, nml)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("writing the status of NodeMigLayout %s: %v", node, err)
	}
}

func getNodeMigLayout(t *testing.T, ctx context.Context, c crclient.Client, node string) *v1alpha1.NodeMigLayout {
	t.Helper()
	nml := &v1alpha1.NodeMigLayout{}
	if err := c.Get(ctx, crclient.ObjectKey{Name: node}, nml); err != nil {
		t.Fatal(err)
	}
	return nml
}

func waitNodeMigLayout(t *testing.T, ctx context.Context, c crclient.Client, node, what string, ok func(*v1alpha1.NodeMigLayout) bool) *v1alpha1.NodeMigLayout {
	t.Helper()
	var last *v1alpha1.NodeMigLayout
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		nml := &v1alpha1.NodeMigLayout{}
		if err := c.Get(ctx, crclient.ObjectKey{Name: node}, nml); err != nil {
			return false, crclient.IgnoreNotFound(err)
		}
		last = nml
		return ok(nml), nil
	})
	if err != nil {
		t.Fatalf("waiting for NodeMigLayout %s (%s): %v; last seen: %+v", node, what, err, last)
	}
	return last
}

func waitSpec(t *testing.T, ctx context.Context, c crclient.Client, node string, gpus ...v1alpha1.GPUSpec) *v1alpha1.NodeMigLayout {
	t.Helper()
	var diff string
	nml := waitNodeMigLayout(t, ctx, c, node, "spec", func(nml *v1alpha1.NodeMigLayout) bool {
		diff = cmp.Diff(gpus, nml.Spec.GPUs)
		return diff == ""
	})
	if diff != "" {
		t.Fatalf("spec.gpus of %s (-want +got):\n%s", node, diff)
	}
	return nml
}

func waitGone(t *testing.T, ctx context.Context, c crclient.Client, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, crclient.ObjectKey{Name: node}, &v1alpha1.NodeMigLayout{})
		return apierrors.IsNotFound(err), crclient.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("waiting for NodeMigLayout %s to go: %v", node, err)
	}
}

func waitMigLayout(t *testing.T, ctx context.Context, c crclient.Client, name, what string, ok func(*v1alpha1.MigLayoutStatus) bool) *v1alpha1.MigLayoutStatus {
	t.Helper()
	var last v1alpha1.MigLayoutStatus
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ml := &v1alpha1.MigLayout{}
		if err := c.Get(ctx, crclient.ObjectKey{Name: name}, ml); err != nil {
			return false, err
		}
		last = ml.Status
		return ml.Status.ObservedGeneration == ml.Generation && ok(&ml.Status), nil
	})
	if err != nil {
		t.Fatalf("waiting for MigLayout %s (%s): %v; last status: %+v", name, what, err, last)
	}
	return &last
}

func hasCondition(s *v1alpha1.MigLayoutStatus, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(s.Conditions, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

type eventWant struct{ Type, Reason, NoteContains string }

// waitEvents waits until each wanted event is recorded on the MigLayout
// (events.k8s.io/v1, namespace default for cluster-scoped objects).
func waitEvents(t *testing.T, ctx context.Context, c crclient.Client, name string, want ...eventWant) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, crclient.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err
		}
		seen = seen[:0]
		found := make([]bool, len(want))
		for _, e := range list.Items {
			if e.Regarding.Kind != "MigLayout" || e.Regarding.Name != name {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
			for i, w := range want {
				if e.Type == w.Type && e.Reason == w.Reason && strings.Contains(e.Note, w.NoteContains) {
					found[i] = true
				}
			}
		}
		for _, f := range found {
			if !f {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for events %+v on MigLayout %s: %v; seen:\n%s", want, name, err, strings.Join(seen, "\n"))
	}
}
