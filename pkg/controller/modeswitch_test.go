package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// modeSwitchCluster is a fake cluster with Static MigLayout a (pool a,
// rule 4g.40gb:1) and Auto MigLayout b (pool b), node n1 in pool, and n1's
// NodeMigLayout controlled by a: GPU 0 asked 4g.40gb@0 by a's rule, its
// agent still Ready on 3g.40gb@0,3g.40gb@4 (the change not started), GPU 1
// asked 4g.40gb@0 too and Repartitioning (under way).
func modeSwitchCluster(t *testing.T, pool string) (client.Client, *Reconciler) {
	t.Helper()
	a, b := staticMigLayout("a", "uid-a", "a"), autoMigLayout("b", nil)
	a.Spec.Rules = rules(rule("whole").counts("4g.40gb", 1))
	nml := ownedBy(nodeMigLayout("n1").spec(
		specGPU(0, "4g.40gb@0", `rule "whole": profiles 4g.40gb:1`), specGPU(1, "4g.40gb@0", `rule "whole": profiles 4g.40gb:1`)).
		status(a100(0).layout(halvesLayout), a100(1).layout(halvesLayout).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")).build(), a)
	nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeStatic)}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, b, node("n1", map[string]string{"pool": pool}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
}

func reconcileNamed(t *testing.T, r *Reconciler, names ...string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	for _, name := range names {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
}

// layoutsOf are the desired layouts of n1's GPUs and who wrote them.
func layoutsOf(t *testing.T, c client.Client) (map[int32]string, string) {
	t.Helper()
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	out := map[int32]string{}
	for _, g := range nml.Spec.GPUs {
		out[g.Index] = g.Layout
	}
	return out, nml.Annotations[v1alpha1.AnnotationSpecWrittenBy]
}

// TestAutoDropsStaticChangesNotStarted: a MigLayout switched to Auto mode,
// and an Auto MigLayout adopting a node from a Static one (in either order
// of the two MigLayouts' passes), drop the Static change the agent has not
// started (GPU 0 set back to its actual layout) and keep the one under way
// (GPU 1): nothing asks for the first any more, and the Auto planner plans
// the node from its devices.
func TestAutoDropsStaticChangesNotStarted(t *testing.T) {
	want := map[int32]string{0: halvesLayout, 1: "4g.40gb@0"}
	t.Run("switched to Auto", func(t *testing.T) { testSwitchedToAuto(t, want, true) })
	t.Run("switched to Auto, an earlier release's object", func(t *testing.T) { testSwitchedToAuto(t, want, false) })
	for name, order := range map[string][]string{"Static MigLayout first": {"a", "b"}, "Auto MigLayout first": {"b", "a"}} {
		t.Run("node moved to an Auto MigLayout, "+name, func(t *testing.T) {
			c, r := modeSwitchCluster(t, "b")
			reconcileNamed(t, r, order...)
			var nml v1alpha1.NodeMigLayout
			if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
				if order[0] == "a" {
					return // released by a, then created by b: nothing of a's left (the same end as the other order)
				}
				t.Fatal(err)
			}
			got, _ := layoutsOf(t, c)
			for idx, layout := range got {
				if idx == 0 && layout != halvesLayout {
					t.Errorf("n1 under b: GPU 0 -> %q, want a's change not started dropped (%s)", layout, halvesLayout)
				}
			}
		})
	}
}

// reportedPastTheCache writes n1's status as report changes it and returns
// n1 as it was before, for a cache behind that write
// (staleNodeMigLayouts).
func reportedPastTheCache(t *testing.T, c client.Client, report func([]v1alpha1.GPUStatus)) *v1alpha1.NodeMigLayout {
	t.Helper()
	var old v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &old); err != nil {
		t.Fatal(err)
	}
	cur := old.DeepCopy()
	report(cur.Status.GPUs)
	if err := c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	return &old
}

// switchToAuto switches MigLayout a to Auto mode.
func switchToAuto(t *testing.T, c client.Client) {
	t.Helper()
	var a v1alpha1.MigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "a"}, &a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Mode, a.Spec.Rules = v1alpha1.ModeAuto, nil
	if err := c.Update(context.Background(), &a); err != nil {
		t.Fatal(err)
	}
}

// testSwitchedToAuto switches MigLayout a to Auto and checks n1's spec;
// annotated false makes n1's NodeMigLayout one of an earlier release
// (without the spec-written-by annotation), which a's Static pass before
// the switch annotates.
func testSwitchedToAuto(t *testing.T, want map[int32]string, annotated bool) {
	c, r := modeSwitchCluster(t, "a")
	ctx := context.Background()
	if !annotated {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
			t.Fatal(err)
		}
		delete(nml.Annotations, v1alpha1.AnnotationSpecWrittenBy)
		if err := c.Update(ctx, &nml); err != nil {
			t.Fatal(err)
		}
		reconcileNamed(t, r, "a")
	}
	switchToAuto(t, c)
	reconcileNamed(t, r, "a")
	got, by := layoutsOf(t, c)
	if diff := cmp.Diff(want, got); diff != "" || by != string(v1alpha1.ModeAuto) {
		t.Errorf("after the switch (-want +got), written by %q:\n%s", by, diff)
	}
}

// TestStaticPassDoesNotOverwriteAutoPlan: the cache still shows MigLayout
// a Static while it was switched to Auto and the planner has written n1's
// plan: a's pass, about to write its rule's layout over the plan, reads a
// from the API server, finds it switched, and writes nothing.
func TestStaticPassDoesNotOverwriteAutoPlan(t *testing.T) {
	c, r := modeSwitchCluster(t, "a")
	ctx := context.Background()
	var stale v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &stale); err != nil {
		t.Fatal(err)
	}
	// The switch, and the planner's write.
	live := stale.DeepCopy()
	live.Spec.Mode, live.Spec.Rules = v1alpha1.ModeAuto, nil
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
		t.Fatal(err)
	}
	plan := nml.DeepCopy()
	plan.Spec.GPUs[0] = v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "1g.10gb@0," + halvesLayout[len("3g.40gb@0,"):], Reason: "serves ns/p", ServedPods: []string{"ns/p"}}
	plan.Annotations[v1alpha1.AnnotationSpecWrittenBy] = string(v1alpha1.ModeAuto)
	if err := c.Patch(ctx, plan, client.MergeFrom(&nml)); err != nil {
		t.Fatal(err)
	}
	before, _ := layoutsOf(t, c)
	r.Client = &staleMigLayout{Client: c, ml: &stale}
	reconcileNamed(t, r, "a")
	if after, by := layoutsOf(t, c); !cmp.Equal(before, after) || by != string(v1alpha1.ModeAuto) {
		t.Errorf("a's pass from a cache showing it Static wrote %v (by %q) over the Auto plan %v", after, by, before)
	}
}

// staleMigLayout is a cache that shows ml as it was.
type staleMigLayout struct {
	client.Client
	ml *v1alpha1.MigLayout
}

func (c *staleMigLayout) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if m, ok := obj.(*v1alpha1.MigLayout); ok && key.Name == c.ml.Name {
		c.ml.DeepCopyInto(m)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *staleMigLayout) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*v1alpha1.MigLayoutList); ok {
		for i := range l.Items {
			if l.Items[i].Name == c.ml.Name {
				c.ml.DeepCopyInto(&l.Items[i])
			}
		}
	}
	return nil
}

// TestSpecWriteRetriedAfterStatusConflict: the cache is behind the agent's
// last status write (an older resourceVersion, the same spec): the spec
// write, guarded by the resourceVersion, conflicts, and is retried on the
// object read from the API server, whose spec is still the one read.
func TestSpecWriteRetriedAfterStatusConflict(t *testing.T) {
	c, r := modeSwitchCluster(t, "a")
	ctx := context.Background()
	old := reportedPastTheCache(t, c, func(st []v1alpha1.GPUStatus) {
		st[1].Phase, st[1].Reason, st[1].Layout = v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, "4g.40gb@0"
	})
	var a v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Rules = rules(rule("thirds").counts("2g.20gb", 3))
	if err := c.Update(ctx, &a); err != nil {
		t.Fatal(err)
	}
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n1": old}}
	reconcileNamed(t, r, "a")
	got, by := layoutsOf(t, c)
	if got[0] == "4g.40gb@0" || by != string(v1alpha1.ModeStatic) {
		t.Errorf("after a's rule changed: n1 %v (by %q), want the new rule's layouts written in spite of the status conflict", got, by)
	}
}

// TestPlannerWaitsForTheTakeOver: n1's NodeMigLayout, under Auto MigLayout
// auto, still holds a spec written in Static mode (GPU 1's change not
// started). The planner writes no plan on it until the reconciler has
// taken it over (dropped that change, the spec marked written in Auto
// mode): a plan written first would mark the Static change as its own, and
// it would be carried out for nothing.
func TestPlannerWaitsForTheTakeOver(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2})
	nml := autoNML("n1", ml, a100(0).layout("7g.80gb@0"), a100(1).layout(halvesLayout))
	nml.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(1, "4g.40gb@0", `rule "whole": profiles 4g.40gb:1`)}
	nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeStatic)}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), nml,
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
	for range 10 { // the batch's wait, then plans held
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(max(res.RequeueAfter, time.Second))
	}
	if got := h.specOf("n1"); got[0] != "" || got[1] != "4g.40gb@0" {
		t.Errorf("the planner wrote %v on a spec written in Static mode, want nothing before the take-over", got)
	}
	r := &Reconciler{Client: h.c, APIReader: h.c, Scheme: h.c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	reconcileNamed(t, r, "auto")
	if got := h.specOf("n1"); got[1] != halvesLayout {
		t.Errorf("after the take-over n1 -> %v, want GPU 1's Static change dropped (%s)", got, halvesLayout)
	}
	h.now = h.now.Add(h.a.max())
	h.settle()
	got := h.specOf("n1")
	if !strings.Contains(got[0]+got[1], "1g.10gb") || strings.Contains(got[0]+got[1], "4g.40gb") {
		t.Errorf("after the take-over the plan wrote %v, want a GPU changed for p1 (a 1g.10gb) and no Static change left", got)
	}
}

// TestDropNotRetriedOverAStartedChange: switched to Auto, the reconciler
// judges GPU 0's Static change not started on a cache behind the agent's
// last report (Repartitioning: started). Its drop meets a conflict; the
// retry, on the live object, finds the change under way and does not
// write the drop (the agent, past its last read of the spec, would finish
// the change and then undo it).
func TestDropNotRetriedOverAStartedChange(t *testing.T) {
	c, r := modeSwitchCluster(t, "a")
	old := reportedPastTheCache(t, c, func(st []v1alpha1.GPUStatus) {
		st[0].Phase, st[0].Reason = v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning
	})
	switchToAuto(t, c)
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n1": old}}
	_, lctx := ktesting.NewTestContext(t)
	_, _ = r.Reconcile(lctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}) // the conflict, returned for a requeue
	if got, by := layoutsOf(t, c); got[0] != "4g.40gb@0" {
		t.Errorf("GPU 0 Repartitioning (live): spec %q (by %q), want its change kept, not dropped on a stale read", got[0], by)
	}
}
