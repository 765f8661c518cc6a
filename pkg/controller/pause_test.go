package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// pausedCluster is a fake cluster with Static MigLayout a (rule: a whole
// 7g.80gb), paused, and four nodes: n1 was given the whole GPU and has not
// started (Ready on halves), n2 is repartitioning to it, n3 was given halves
// and holds them, n4 holds the whole GPU.
func pausedCluster(t *testing.T) (client.Client, *Reconciler, *events.FakeRecorder) {
	t.Helper()
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	a.Spec.MaxNodesChanging = ptr.To[int32](1)
	a.Spec.Paused = true
	objs := []client.Object{a}
	for name, nml := range map[string]*nmlBuilder{
		"n1": nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(halvesLayout)),
		"n2": nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(halvesLayout).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")),
		"n3": nodeMigLayout("n3").spec(specGPU(0, halvesLayout, "rule")).status(a100(0).layout(halvesLayout)),
		"n4": nodeMigLayout("n4").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(wholeLayout)),
	} {
		objs = append(objs, node(name, map[string]string{"pool": "a"}), ownedBy(nml.build(), a))
	}
	rec := events.NewFakeRecorder(100)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}, rec
}

// onePausedNode is a fake cluster of MigLayout a, node n1 (pool a) and
// n1's NodeMigLayout nml, with a Reconciler over it.
func onePausedNode(t *testing.T, a *v1alpha1.MigLayout, nml *v1alpha1.NodeMigLayout) (client.Client, *Reconciler) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
}

func specLayouts(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var list v1alpha1.NodeMigLayoutList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		for _, g := range n.Spec.GPUs {
			out[n.Name] = g.Layout
			if strings.Contains(g.Reason, dropForPause) {
				out[n.Name] += " (dropped)"
			}
		}
	}
	return out
}

// recorded drains the events rec holds, as "Type Reason note".
func recorded(rec *events.FakeRecorder) []string {
	var out []string
	for len(rec.Events) > 0 {
		out = append(out, <-rec.Events)
	}
	return out
}

// TestPausedStaticStartsNoChange: a paused Static MigLayout drops the change
// n1's agent has not started (the GPU keeps its halves), lets n2's change
// under way finish, gives n3 nothing new and leaves n4; the nodes its rules
// would change are Pending, said to be paused, and the MigLayout not Ready,
// Paused. Resumed, the rules apply again (maxNodesChanging 1: one node at
// a time, n2's change in flight holding the slot).
func TestPausedStaticStartsNoChange(t *testing.T) {
	c, r, rec := pausedCluster(t)
	reconcileLayoutA(t, r)

	want := map[string]string{"n1": halvesLayout + " (dropped)", "n2": wholeLayout, "n3": halvesLayout, "n4": wholeLayout}
	if diff := cmp.Diff(want, specLayouts(t, c)); diff != "" {
		t.Errorf("paused: specs (-want +got):\n%s", diff)
	}
	var ml v1alpha1.MigLayout
	if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, row := range ml.Status.Nodes {
		rows[row.Node] = string(row.Phase)
		if strings.HasPrefix(row.Message, msgPausedNode) {
			rows[row.Node] += " paused"
		}
	}
	if diff := cmp.Diff(map[string]string{"n1": "Pending paused", "n2": "Repartitioning", "n3": "Pending paused", "n4": "Ready"}, rows); diff != "" {
		t.Errorf("paused: rows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]condition{
		{"Ready", "False", "NodesNotReady", "3 of 4 nodes are not ready: 1 progressing, 2 paused"},
		{"Paused", "True", "Paused", msgPaused},
	}, conditionsOf(readyAndPaused(ml.Status.Conditions))); diff != "" {
		t.Errorf("paused: conditions (-want +got):\n%s", diff)
	}
	if evts := recorded(rec); !containsEvent(evts, "Normal "+EventPaused) {
		t.Errorf("paused: events %q, want a %s event", evts, EventPaused)
	}
	// Told once.
	reconcileLayoutA(t, r)
	if evts := recorded(rec); containsEvent(evts, "Normal "+EventPaused) {
		t.Errorf("paused, reconciled again: events %q, want no second %s", evts, EventPaused)
	}

	ml.Spec.Paused = false
	if err := c.Update(context.Background(), &ml); err != nil {
		t.Fatal(err)
	}
	reconcileLayoutA(t, r)
	// n2's change holds the one slot: the others wait their turn.
	want = map[string]string{"n1": halvesLayout + " (dropped)", "n2": wholeLayout, "n3": halvesLayout, "n4": wholeLayout}
	if diff := cmp.Diff(want, specLayouts(t, c)); diff != "" {
		t.Errorf("resumed: specs (-want +got):\n%s", diff)
	}
	if evts := recorded(rec); !containsEvent(evts, "Normal "+EventResumed) {
		t.Errorf("resumed: events %q, want a %s event", evts, EventResumed)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionPaused); p == nil || p.Status != "False" {
		t.Errorf("resumed: Paused condition %+v, want False", p)
	}
	// n2 done: n1 takes the slot, then n3.
	finish := func(name string) {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &nml); err != nil {
			t.Fatal(err)
		}
		nml.Status.GPUs = []v1alpha1.GPUStatus{a100(0).layout(nml.Spec.GPUs[0].Layout).build()}
		if err := c.Status().Update(context.Background(), &nml); err != nil {
			t.Fatal(err)
		}
	}
	finish("n2")
	reconcileLayoutA(t, r)
	finish("n1")
	reconcileLayoutA(t, r)
	want = map[string]string{"n1": wholeLayout, "n2": wholeLayout, "n3": wholeLayout, "n4": wholeLayout}
	if diff := cmp.Diff(want, specLayouts(t, c)); diff != "" {
		t.Errorf("resumed, n2 and n1 done: specs (-want +got):\n%s", diff)
	}
}

// TestPausedAdoptsWithoutStartingChanges: a paused MigLayout adopting a
// node another MigLayout left drops that spec's unstarted change and owns
// the object, writing nothing its own rules ask for; the spec is its mode's
// from then on, as an adoption writes it unpaused.
func TestPausedAdoptsWithoutStartingChanges(t *testing.T) {
	for mode, build := range map[v1alpha1.LayoutMode]func() *v1alpha1.MigLayout{
		v1alpha1.ModeStatic: func() *v1alpha1.MigLayout {
			a := staticMigLayout("a", "uid-a", "a")
			a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
			return a
		},
		v1alpha1.ModeAuto: func() *v1alpha1.MigLayout { return autoMigLayout("a", nil) },
	} {
		t.Run(string(mode), func(t *testing.T) {
			a := build()
			a.Spec.Paused = true
			old := staticMigLayout("old", "uid-old", "old")
			nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "1g.10gb@0", "old rule")).status(a100(0).layout(halvesLayout)).build(), old)
			c, r := onePausedNode(t, a, nml)
			reconcileLayoutA(t, r)
			var got v1alpha1.NodeMigLayout
			if err := c.Get(context.Background(), client.ObjectKey{Name: "n1"}, &got); err != nil {
				t.Fatal(err)
			}
			if o := got.OwnerReferences; len(o) != 1 || o[0].UID != a.UID {
				t.Errorf("owners %+v, want MigLayout a alone", o)
			}
			if diff := cmp.Diff(map[string]string{"n1": halvesLayout + " (dropped)"}, specLayouts(t, c)); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if w := got.Annotations[v1alpha1.AnnotationSpecWrittenBy]; w != string(mode) {
				t.Errorf("written-by %q, want %s", w, mode)
			}
		})
	}
}

// TestPausedAutoPlansNothing: a paused Auto MigLayout's nodes are frozen: a
// pod only a change there serves waits, told why, and the change its agent
// has not started is dropped by the MigLayout reconciler; resumed, the
// planner serves the pod.
func TestPausedAutoPlansNothing(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	ml.Spec.Paused = true
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(wholeLayout)),
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("paused: n1's spec %v, want nothing planned", got)
	}
	evts := h.events()
	if !slices.ContainsFunc(evts, func(e string) bool {
		return strings.HasPrefix(e, "Normal "+EventWaitingForCapacity+" ") && strings.Contains(e, "their MigLayout is paused")
	}) {
		t.Errorf("paused: events %q, want p1 told it waits for capacity, the nodes' MigLayout paused", evts)
	}

	// A change written before the pause that the agent has not started
	// is dropped by the MigLayout reconciler.
	n1 := h.nml("n1")
	n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0", "planned before the pause")}
	metav1.SetMetaDataAnnotation(&n1.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(v1alpha1.ModeAuto))
	if err := h.c.Update(context.Background(), n1); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: h.c, Scheme: h.c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "auto"}}); err != nil {
		t.Fatal(err)
	}
	if got := h.nml("n1").Spec.GPUs; len(got) != 1 || got[0].Layout != wholeLayout || !strings.Contains(got[0].Reason, dropForPause) {
		t.Errorf("paused: n1's spec %+v, want the unstarted change dropped back to %s", got, wholeLayout)
	}
	if w := h.nml("n1").Annotations[v1alpha1.AnnotationSpecWrittenBy]; w != string(v1alpha1.ModeAuto) {
		t.Errorf("paused: written-by %q, want Auto kept", w)
	}

	var live v1alpha1.MigLayout
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: "auto"}, &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Paused = false
	if err := h.c.Update(context.Background(), &live); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Minute)
	h.settle()
	if got := h.specOf("n1")[0]; got == wholeLayout || !strings.Contains(got, "1g.10gb") {
		t.Errorf("resumed: n1's GPU 0 planned as %q, want a 1g.10gb made for p1", got)
	}
}

func readyAndPaused(cs []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range cs {
		if c.Type == v1alpha1.ConditionReady || c.Type == v1alpha1.ConditionPaused {
			out = append(out, c)
		}
	}
	return out
}

// containsEvent reports whether one of evts has the given type and reason
// ("Normal Paused").
func containsEvent(evts []string, typeAndReason string) bool {
	return slices.ContainsFunc(evts, func(e string) bool { return strings.HasPrefix(e, typeAndReason+" ") })
}

// TestPausedWhileAPlanRunsWritesNothing: a pause that lands after a plan
// pass read the MigLayouts and before it writes stops the write (the
// write-time check of the MigLayout), so no change starts on a paused node.
func TestPausedWhileAPlanRunsWritesNothing(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	pauseNow := false
	funcs := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.PodList); ok && pauseNow {
			pauseNow = false
			var live v1alpha1.MigLayout
			if err := c.Get(ctx, client.ObjectKey{Name: "auto"}, &live); err != nil {
				return err
			}
			live.Spec.Paused = true
			if err := c.Update(ctx, &live); err != nil {
				return err
			}
		}
		return c.List(ctx, list, opts...)
	}}
	h := newAutoClusterIntercepted(t, ml, funcs,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(wholeLayout)),
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
	res, err := h.a.Reconcile(context.Background(), autoKey) // the batch window opens
	if err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(res.RequeueAfter)
	pauseNow = true
	if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
		t.Fatal(err)
	}
	if pauseNow {
		t.Fatal("the pass listed no pods: the pause did not land mid-pass")
	}
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written after the MigLayout was paused", got)
	}
}

// TestPausedResumedToldOnce: a resume whose first status write gives way
// to another edit of the spec (the status written by the next pass) is
// told once, not once per pass.
func TestPausedResumedToldOnce(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	a.Spec.Paused, a.Generation = true, 1
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(wholeLayout)).build(), a)
	editNow := false
	funcs := interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if _, ok := obj.(*v1alpha1.MigLayout); ok && editNow {
			editNow = false
			var live v1alpha1.MigLayout
			if err := c.Get(ctx, client.ObjectKey{Name: "a"}, &live); err != nil {
				return err
			}
			live.Generation++
			live.Spec.Rules[0].Name = "whole-gpu"
			if err := c.Update(ctx, &live); err != nil {
				return err
			}
		}
		return c.Status().Update(ctx, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).WithInterceptorFuncs(funcs).Build()
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	reconcileLayoutA(t, r)
	recorded(rec)

	var ml v1alpha1.MigLayout
	if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
		t.Fatal(err)
	}
	ml.Spec.Paused, ml.Generation = false, 2
	if err := c.Update(context.Background(), &ml); err != nil {
		t.Fatal(err)
	}
	editNow = true
	reconcileLayoutA(t, r)
	evts := recorded(rec)
	if editNow {
		t.Fatal("no status write was tried")
	}
	reconcileLayoutA(t, r)
	evts = append(evts, recorded(rec)...)
	n := 0
	for _, e := range evts {
		if strings.HasPrefix(e, "Normal "+EventResumed+" ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d %s events (%q), want 1", n, EventResumed, evts)
	}
}

// TestPausedNodeTheRulesLeaveAloneIsReady: a GPU the rules no longer cover
// (no rule matches it) is left as it is, paused or not: a node whose other
// GPUs hold the rules' layouts is Ready, not held by the pause.
func TestPausedNodeTheRulesLeaveAloneIsReady(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("first").indices(0).counts("7g.80gb", 1))
	a.Spec.Paused = true
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule"), specGPU(1, wholeLayout, "an older rule")).
		status(a100(0).layout(wholeLayout), a100(1).layout(wholeLayout)).build(), a)
	c, r := onePausedNode(t, a, nml)
	reconcileLayoutA(t, r)
	var ml v1alpha1.MigLayout
	if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
		t.Fatal(err)
	}
	if row := ml.Status.Nodes[0]; row.Phase != v1alpha1.PhaseReady {
		t.Errorf("row %s %q, want Ready: GPU 0 holds its rule's layout and GPU 1 is left as it is", row.Phase, row.Message)
	}
}

// TestPausedWithAnInvalidSelectorDropsUnstarted: a paused MigLayout whose
// selector does not parse leaves the nodes it holds as they are, a change
// written before the pause that the agent has not started included.
func TestPausedWithAnInvalidSelectorDropsUnstarted(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	a.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}
	for _, paused := range []bool{false, true} {
		a.Spec.Paused = paused
		nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(halvesLayout)).build(), a)
		c, r := onePausedNode(t, a.DeepCopy(), nml)
		reconcileLayoutA(t, r)
		want := wholeLayout // not paused: held as it is, the change in its spec too
		if paused {
			want = halvesLayout + " (dropped)"
		}
		if got := specLayouts(t, c)["n1"]; got != want {
			t.Errorf("paused %t, selector invalid: n1's spec %q, want %q", paused, got, want)
		}
	}
}

// TestPauseKeepsRolloutExpectations: a pause and a resume in quick
// succession, while the cache does not show a write made before the pause
// yet, leave that node counted as changing: resumed, maxNodesChanging 1
// gives no second node a new layout beside it.
func TestPauseKeepsRolloutExpectations(t *testing.T) {
	c, n2 := staleRolloutCluster(t)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	halveN2ThenReportN1(t, c, r, n2)
	setPaused := func(paused bool) {
		var ml v1alpha1.MigLayout
		if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
			t.Fatal(err)
		}
		ml.Spec.Paused = paused
		if err := c.Update(context.Background(), &ml); err != nil {
			t.Fatal(err)
		}
		// The paused pass's drop on n2 conflicts with the write the cache
		// does not show: an error, retried later.
		_, _ = r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	}
	setPaused(true)
	setPaused(false)
	if got := specLayouts(t, c); got["n1"] == halvesLayout {
		t.Errorf("resumed: n1 given %s beside n2's change the cache does not show yet (specs %v)", halvesLayout, got)
	}
}

// TestPausedWhileTheCacheShowsItUnpausedWritesNothing: a Static pass whose
// cache still shows the MigLayout unpaused (with the rules the pause came
// with), or with the rules an edit has replaced, writes no new layout: the
// API server has it paused, or asking for other layouts, at a later
// generation. The same where the pass takes the node over from a MigLayout
// that no longer selects it.
func TestPausedWhileTheCacheShowsItUnpausedWritesNothing(t *testing.T) {
	for name, tc := range map[string]struct {
		takeOver bool // n1's NodeMigLayout is another MigLayout's
		// edit makes the live MigLayout (generation 2) of the cached one
		// (generation 1, rules asking for one 7g.80gb).
		edit func(live *v1alpha1.MigLayout)
	}{
		"paused":                    {edit: func(ml *v1alpha1.MigLayout) { ml.Spec.Paused = true }},
		"paused, taking over":       {takeOver: true, edit: func(ml *v1alpha1.MigLayout) { ml.Spec.Paused = true }},
		"rules edited":              {edit: func(ml *v1alpha1.MigLayout) { ml.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2)) }},
		"rules edited, taking over": {takeOver: true, edit: func(ml *v1alpha1.MigLayout) { ml.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2)) }},
	} {
		t.Run(name, func(t *testing.T) {
			stale := staticMigLayout("a", "uid-a", "a")
			stale.Spec.Rules, stale.Generation = rules(rule("whole").counts("7g.80gb", 1)), 1
			a := stale.DeepCopy()
			tc.edit(a)
			a.Generation = 2
			owner := a
			if tc.takeOver {
				owner = staticMigLayout("gone", "uid-gone", "a")
			}
			c, r := onePausedNode(t, a, ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "rule")).status(a100(0).layout(halvesLayout)).build(), owner))
			r.Client, r.APIReader = &staleMigLayout{Client: c, ml: stale}, c
			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := specLayouts(t, c)["n1"]; got != halvesLayout {
				t.Errorf("n1's spec %q written from a cache that showed generation 1, want %s kept", got, halvesLayout)
			}
			if res.RequeueAfter <= 0 {
				t.Errorf("requeue after %v, want a look again once the cache catches up", res.RequeueAfter)
			}
		})
	}
}

// TestAutoPausedWhileTheCacheShowsItUnpausedWritesNothing: a plan made from
// a cache that still shows the Auto MigLayout unpaused is not written once
// the API server has it paused (the write-time check reads the MigLayout
// live), and the pass asks to look again.
func TestAutoPausedWhileTheCacheShowsItUnpausedWritesNothing(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	stale := ml.DeepCopy()
	ml.Spec.Paused, ml.Generation = true, 2
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(wholeLayout)),
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
	h.a.Client, h.a.APIReader, h.a.UnboundAfter = &staleMigLayout{Client: h.c, ml: stale}, h.c, -1
	for range 5 {
		res, err := h.a.Reconcile(t.Context(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 {
			t.Fatalf("requeue after %v, want a look again once the cache catches up", res.RequeueAfter)
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written from a cache that showed the MigLayout unpaused, want nothing written", got)
	}
	if evts := h.events(); slices.ContainsFunc(evts, func(e string) bool { return strings.Contains(e, EventWaitingForRepartition) }) {
		t.Errorf("events %q: p1 told of a repartition that was not written", evts)
	}

	// The same pass with the API server agreeing with the cache writes.
	h.a.APIReader = h.a.Client
	h.now = h.now.Add(time.Minute)
	h.settle()
	if got := h.specOf("n1"); len(got) == 0 || !strings.Contains(got[0], "1g.10gb") {
		t.Errorf("unpaused live: n1's spec %v, want a 1g.10gb made for p1", got)
	}
}

// TestResumedWhileTheCacheShowsItPausedDropsNothing: a pass whose cache
// still shows the MigLayout paused, while the API server has it resumed,
// does not drop the change the planner wrote for it since (it reads the
// MigLayout live before a drop), and asks to look again.
func TestResumedWhileTheCacheShowsItPausedDropsNothing(t *testing.T) {
	a := autoMigLayout("a", nil)
	a.Generation = 3
	planned := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "1g.10gb@0", "serves 1 pending pod(s)")).status(a100(0).layout(wholeLayout)).build(), a)
	metav1.SetMetaDataAnnotation(&planned.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(v1alpha1.ModeAuto))
	c, r := onePausedNode(t, a, planned)
	stale := a.DeepCopy()
	stale.Spec.Paused, stale.Generation = true, 2
	r.Client, r.APIReader = &staleMigLayout{Client: c, ml: stale}, c
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := specLayouts(t, c)["n1"]; got != "1g.10gb@0" {
		t.Errorf("n1's spec %q, want the plan written after the resume kept", got)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("requeue after %v, want a look again once the cache catches up", res.RequeueAfter)
	}

	// Once the API server has it paused too, the unstarted change goes.
	var live v1alpha1.MigLayout
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(a), &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Paused = true
	if err := c.Update(t.Context(), &live); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(a), stale); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if got := specLayouts(t, c)["n1"]; got != wholeLayout+" (dropped)" {
		t.Errorf("paused live: n1's spec %q, want the unstarted change dropped back to %s", got, wholeLayout)
	}
}

// flakyMigLayoutReader fails its first fails Gets of a MigLayout, as an API
// server that is briefly unavailable does.
type flakyMigLayoutReader struct {
	client.Reader
	fails int
}

func (r *flakyMigLayoutReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.MigLayout); ok && r.fails > 0 {
		r.fails--
		return apierrors.NewServiceUnavailable("etcd leader change")
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestAutoMigLayoutReadFailsBeforeWrite: a MigLayout that cannot be read
// before a plan is written is an error of the pass (tried again with the
// controller's backoff, nothing written), not a MigLayout taken as paused:
// the plan is written on the next pass, and a cancel is not lost.
func TestAutoMigLayoutReadFailsBeforeWrite(t *testing.T) {
	t.Run("change", func(t *testing.T) {
		ml := autoMigLayout("auto", nil)
		h := newAutoCluster(t, ml,
			node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(wholeLayout)),
			autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"))
		h.a.APIReader, h.a.UnboundAfter = &flakyMigLayoutReader{Reader: h.c, fails: 1}, -1
		failed := false
		for range 5 {
			res, err := h.a.Reconcile(t.Context(), autoKey)
			if err != nil {
				failed = true
				if got := h.specOf("n1"); len(got) != 0 {
					t.Fatalf("n1's spec %v written by the pass whose MigLayout read failed", got)
				}
				continue
			}
			if len(h.specOf("n1")) > 0 {
				break
			}
			h.now = h.now.Add(res.RequeueAfter)
		}
		if !failed {
			t.Error("no pass returned the failed read")
		}
		if got := h.specOf("n1"); len(got) == 0 || !strings.Contains(got[0], "1g.10gb") {
			t.Errorf("n1's spec %v, want a 1g.10gb made for p1 once the MigLayout reads again", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ml := autoMigLayout("auto", nil)
		n1 := autoNML("n1", ml, a100(0).layout("1g.10gb@0").inUse("1g.10gb@0").
			phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "1g.10gb@0 is allocated"))
		n1.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "for gone", ServedPods: []string{"ns/gone"}}}
		h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1)
		h.a.APIReader, h.a.UnboundAfter = &flakyMigLayoutReader{Reader: h.c, fails: 1}, -1
		failed := false
		for range 5 {
			h.now = h.now.Add(time.Minute)
			if _, err := h.a.Reconcile(t.Context(), autoKey); err != nil {
				failed = true
			}
		}
		if !failed {
			t.Error("no pass returned the failed read")
		}
		if got := h.specOf("n1")[0]; got != "1g.10gb@0" {
			t.Errorf("n1/gpu-0 desired %q, want the blocked change cancelled back to 1g.10gb@0", got)
		}
	})
}

// TestPausedWithAnInvalidSelectorResumedSinceDropsNothing: a paused
// MigLayout whose selector does not parse, as the cache shows it, drops
// nothing once the API server has it at a later generation (resumed, its
// selector fixed), and looks again.
func TestPausedWithAnInvalidSelectorResumedSinceDropsNothing(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	a.Generation = 3
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(halvesLayout)).build(), a)
	c, r := onePausedNode(t, a, nml)
	stale := a.DeepCopy()
	stale.Spec.Paused, stale.Generation = true, 2
	stale.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}
	r.Client, r.APIReader = &staleMigLayout{Client: c, ml: stale}, c
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := specLayouts(t, c)["n1"]; got != wholeLayout {
		t.Errorf("n1's spec %q, want %s kept (the MigLayout was resumed since the cache's copy)", got, wholeLayout)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("requeue after %v, want a look again once the cache catches up", res.RequeueAfter)
	}
}

// TestPausedWithAnInvalidSelectorNothingToDropReadsNothing: a paused
// MigLayout whose selector does not parse and whose nodes hold no change to
// drop is not read live (an API server that fails the read fails nothing).
func TestPausedWithAnInvalidSelectorNothingToDropReadsNothing(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Paused = true
	a.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}}
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(wholeLayout)).build(), a)
	_, r := onePausedNode(t, a, nml)
	failing := &countingFailingReader{err: errors.New("API server unavailable")}
	r.APIReader = failing
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Errorf("reconcile with nothing to drop: %v", err)
	}
	if failing.gets != 0 {
		t.Errorf("%d live reads with nothing to drop, want none", failing.gets)
	}
}
