package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// switchedSince tells the Static MigLayout the cache shows from the one the
// API server has: deleted, deleted and made again (another UID), changed
// (another generation) or switched to Auto mode; a failed read is
// returned.
func TestSwitchedSinceComparesTheLiveMigLayout(t *testing.T) {
	readFailed := errors.New("API server unavailable")
	for name, tc := range map[string]struct {
		live      v1alpha1.LayoutMode // the mode the API server has; Static where empty
		cached    func(ml *v1alpha1.MigLayout)
		deleted   bool
		readFails bool
		want      bool
	}{
		"the same":            {},
		"deleted":             {deleted: true, want: true},
		"deleted, made again": {cached: func(ml *v1alpha1.MigLayout) { ml.UID = "uid-a-before" }, want: true},
		"changed":             {cached: func(ml *v1alpha1.MigLayout) { ml.Generation-- }, want: true},
		"switched to Auto":    {live: v1alpha1.ModeAuto, cached: func(ml *v1alpha1.MigLayout) { ml.Spec.Mode = v1alpha1.ModeStatic }, want: true},
		"read fails":          {readFails: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a := staticMigLayout("a", "uid-a", "a")
			a.Generation = 2
			if tc.live != "" {
				a.Spec.Mode = tc.live
			}
			builder := fake.NewClientBuilder().WithScheme(testScheme(t))
			if !tc.deleted {
				builder = builder.WithObjects(a)
			}
			c := builder.Build()
			cached := a.DeepCopy()
			if !tc.deleted {
				if err := c.Get(ctx, types.NamespacedName{Name: "a"}, cached); err != nil {
					t.Fatal(err)
				}
			}
			if tc.cached != nil {
				tc.cached(cached)
			}
			r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme()}
			if tc.readFails {
				r.APIReader = failingReads{err: readFailed}
			}
			got, err := r.switchedSince(ctx, cached)
			if tc.readFails {
				if !errors.Is(err, readFailed) {
					t.Errorf("err = %v, want the failed read", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("switched = %v, want %v", got, tc.want)
			}
		})
	}
}

// A Static pass that cannot read its MigLayout from the API server writes
// nothing over the Auto plan a node holds: it returns the error (the
// controller looks again with its backoff).
func TestSyncNodeKeepsAnAutoPlanWhenTheMigLayoutCannotBeRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	readFailed := errors.New("API server unavailable")
	a := staticMigLayout("a", "uid-a", "a")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "1g.10gb@0", "serves ns/p")).status(a100(0).layout(halvesLayout)).build(), a)
	nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeAuto)}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	var existing v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &existing); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, APIReader: failingReads{err: readFailed}, Scheme: c.Scheme()}
	_, _, wait, err := r.syncNode(ctx, a, "n1", &existing, nil)
	if !errors.Is(err, readFailed) || wait {
		// The error is the look again (the controller's backoff): a
		// result beside it would be ignored, with a warning.
		t.Errorf("syncNode: wait %v, err %v; want the failed read returned, without a result beside it", wait, err)
	}
	var stored v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.GPUs[0].Layout; got != "1g.10gb@0" {
		t.Errorf("n1's GPU 0 spec %q, want the Auto plan (1g.10gb@0) kept", got)
	}
}

// A NodeMigLayout being deleted is not written: its node waits for it to
// go, and is looked at again.
func TestSyncNodeWaitsForADeletingNodeMigLayout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := staticMigLayout("a", "uid-a", "a")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "rule")).status(a100(0).layout(wholeLayout)).build(), a)
	nml.Finalizers = []string{"example.com/hold"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	if err := c.Delete(ctx, nml); err != nil {
		t.Fatal(err)
	}
	var existing v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &existing); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme()}
	_, _, wait, err := r.syncNode(ctx, a, "n1", &existing, nil)
	if err != nil || !wait {
		t.Errorf("syncNode: wait %v, err %v; want a wait and no error", wait, err)
	}
	var stored v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.GPUs[0].Layout; got != wholeLayout {
		t.Errorf("n1's GPU 0 spec %q, want it left (%s) while the object goes", got, wholeLayout)
	}
}

// An Auto MigLayout that adopts a node from another Auto MigLayout drops
// the changes of the other's plan the agent has not started: nothing of
// its own asks for them.
func TestSyncNodeAutoAdoptionDropsAnotherPlanNotStarted(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, b := autoMigLayout("a", nil), autoMigLayout("b", nil)
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, "serves ns/p")).status(a100(0).layout(halvesLayout)).build(), b)
	nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeAuto)}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	var existing v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &existing); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme()}
	if _, _, _, err := r.syncNode(ctx, a, "n1", &existing, nil); err != nil {
		t.Fatal(err)
	}
	var stored v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stored); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"gpu0": stored.Spec.GPUs[0].Layout, "owner": metav1.GetControllerOf(&stored).Name}
	if diff := cmp.Diff(map[string]string{"gpu0": halvesLayout, "owner": "a"}, got); diff != "" {
		t.Errorf("n1 after a adopted it (-want +got):\n%s", diff)
	}
}

// release deletes the NodeMigLayouts of nodes no longer selected: one gone
// already is not an error, and a delete that fails leaves the others to
// go in the same pass.
func TestReleaseGoesOnPastFailedDeletes(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "nodemiglayouts"}
	for name, tc := range map[string]struct {
		failN1   error
		wantErr  bool
		wantLeft []string
	}{
		"n1 gone already":   {failN1: apierrors.NewNotFound(gr, "n1"), wantLeft: []string{"n1"}},
		"n1's delete fails": {failN1: apierrors.NewServiceUnavailable("down"), wantErr: true, wantLeft: []string{"n1"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			a := staticMigLayout("a", "uid-a", "a")
			n1 := ownedBy(nodeMigLayout("n1").build(), a)
			n2 := ownedBy(nodeMigLayout("n2").build(), a)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, n1, n2).
				WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if obj.GetName() == "n1" {
						return tc.failN1
					}
					return c.Delete(ctx, obj, opts...)
				}}).Build()
			in := inputs{nodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}}
			for _, n := range []string{"n1", "n2"} {
				var nml v1alpha1.NodeMigLayout
				if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
					t.Fatal(err)
				}
				in.nodeMigLayouts[n] = &nml
			}
			r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme()}
			errs := r.release(ctx, a, Selection{}, in)
			if (len(errs) > 0) != tc.wantErr {
				t.Errorf("errors %v, want some: %v", errs, tc.wantErr)
			}
			var list v1alpha1.NodeMigLayoutList
			if err := c.List(ctx, &list); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, nml := range list.Items {
				left = append(left, nml.Name)
			}
			if diff := cmp.Diff(tc.wantLeft, left); diff != "" {
				t.Errorf("NodeMigLayouts left (-want +got):\n%s", diff)
			}
		})
	}
}

// The row of a node in conflict names at most five other MigLayouts of
// each kind, the others selecting it first, those holding it with an
// invalid selector after.
func TestConflictNoteNamesFiveOfEachKind(t *testing.T) {
	sel := Selection{Conflicts: map[string][]string{}, InvalidHolders: map[string]bool{}}
	for _, o := range []string{"o1", "o2", "o3", "o4", "o5", "o6"} {
		sel.Conflicts[o] = []string{"n1"}
	}
	for _, h := range []string{"h1", "h2", "h3", "h4", "h5"} {
		sel.Conflicts[h] = []string{"n0", "n1"}
		sel.InvalidHolders[h] = true
	}
	sel.Conflicts["elsewhere"] = []string{"n2"}
	want := `also selected by MigLayout "o1", "o2", "o3", "o4", "o5" and 1 more; ` +
		`held by MigLayout "h1", "h2", "h3", "h4", "h5", whose node selector is invalid; the node is left as it is`
	if diff := cmp.Diff(want, conflictNote(sel, "n1")); diff != "" {
		t.Errorf("note (-want +got):\n%s", diff)
	}
}

// TestSwitchedSinceKeepsOnlyStickyAnswers: each write that starts a change
// reads the MigLayout live again while it is found unchanged (a pause may
// land between two writes of one reconcile), but once it is found switched,
// or cannot be read, no other write of the reconcile reads it again.
func TestSwitchedSinceKeepsOnlyStickyAnswers(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a).Build()
	var gets atomic.Int64
	r := &Reconciler{Client: c, APIReader: countingReader{Reader: c, gets: &gets}, Scheme: c.Scheme()}
	ml := a.DeepCopy()
	calls := func(ctx context.Context) (answers []bool, errs []error) {
		for range 3 {
			got, err := r.switchedSince(ctx, ml)
			answers, errs = append(answers, got), append(errs, err)
		}
		return answers, errs
	}

	answers, _ := calls(withLiveCheck(t.Context()))
	if n := gets.Load(); n != 3 || !slices.Equal(answers, []bool{false, false, false}) {
		t.Errorf("unchanged: %d reads, answers %v; want 3 reads (one per write), none switched", n, answers)
	}

	gets.Store(0)
	ml.Generation-- // the cache's copy is behind the API server's
	answers, _ = calls(withLiveCheck(t.Context()))
	if n := gets.Load(); n != 1 || !slices.Equal(answers, []bool{true, true, true}) {
		t.Errorf("switched: %d reads, answers %v; want 1 read, switched for every write", n, answers)
	}
	gets.Store(0)
	calls(withLiveCheck(t.Context()))
	if n := gets.Load(); n != 1 {
		t.Errorf("switched, next reconcile: %d reads, want it read again (1)", n)
	}

	readFailed := errors.New("API server unavailable")
	failing := &countingFailingReader{err: readFailed}
	r.APIReader = failing
	_, errs := calls(withLiveCheck(t.Context()))
	if failing.gets != 1 || !errors.Is(errs[0], readFailed) || !errors.Is(errs[2], readFailed) {
		t.Errorf("read fails: %d reads, errors %v; want 1 read, its error for every write", failing.gets, errs)
	}
}

// countingFailingReader fails every Get with err, and counts them.
type countingFailingReader struct {
	client.Reader
	err  error
	gets int
}

func (r *countingFailingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.gets++
	return r.err
}

// TestPauseMidReconcileStopsLaterWrites: a pause that lands after a Static
// reconcile started a change on one node stops its writes on the others
// (each reads the MigLayout live again).
func TestPauseMidReconcileStopsLaterWrites(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	objs := []client.Object{a}
	for _, n := range []string{"n1", "n2", "n3"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, halvesLayout, "rule")).status(a100(0).layout(halvesLayout)).build(), a))
	}
	var paused atomic.Bool
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := cl.Patch(ctx, obj, p, opts...); err != nil {
				return err
			}
			if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && obj.GetName() == "n1" && !paused.Swap(true) {
				// Paused right after n1 is written (the fake client keeps
				// the generation: bumped by hand).
				var ml v1alpha1.MigLayout
				if err := cl.Get(ctx, types.NamespacedName{Name: "a"}, &ml); err != nil {
					return err
				}
				ml.Spec.Paused, ml.Generation = true, ml.Generation+1
				return cl.Update(ctx, &ml)
			}
			return nil
		}}).Build()
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !paused.Load() {
		t.Fatal("n1 was not written: the pause never landed")
	}
	if got := specLayouts(t, c); !maps.Equal(got, map[string]string{"n1": wholeLayout, "n2": halvesLayout, "n3": halvesLayout}) {
		t.Errorf("specs %v, want only n1 (written before the pause) given %s", got, wholeLayout)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("requeue after %v, want a look again", res.RequeueAfter)
	}
}
