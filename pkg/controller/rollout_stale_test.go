package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// staleNodeMigLayouts is a cache whose lists show the NodeMigLayouts in
// stale as they were, not as written since: an informer that has not
// delivered the writes yet.
type staleNodeMigLayouts struct {
	client.Client
	stale map[string]*v1alpha1.NodeMigLayout
}

func (c *staleNodeMigLayouts) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*v1alpha1.NodeMigLayoutList); ok {
		for i := range l.Items {
			if s := c.stale[l.Items[i].Name]; s != nil {
				s.DeepCopyInto(&l.Items[i])
			}
		}
	}
	return nil
}

// TestMaxNodesChangingStaleCache: with maxNodesChanging 1, a pass gives n2
// the new layout (n1's agent has not reported yet, so n1 has nothing to
// change). n1's agent then reports, and the next pass reads a cache that
// does not show n2's write yet: n2 still counts as changing, so n1 waits
// its turn instead of changing beside n2.
func TestMaxNodesChangingStaleCache(t *testing.T) {
	c, n2 := staleRolloutCluster(t)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	specOf := func(n string) string {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(context.Background(), types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		if len(nml.Spec.GPUs) == 0 {
			return ""
		}
		return nml.Spec.GPUs[0].Layout
	}
	halveN2ThenReportN1(t, c, r, n2)
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	// Should the cache never show n2's write, n1's turn comes when the
	// slot held for it ends: a pass is asked for then.
	if res.RequeueAfter <= 0 || res.RequeueAfter > rolloutExpectTTL+time.Second {
		t.Errorf("requeue after %v, want within %v (the held slot's end)", res.RequeueAfter, rolloutExpectTTL+time.Second)
	}
	if got := specOf("n1"); got == halvesLayout {
		t.Errorf("n1 given %s while n2's change (written, not yet in the cache) goes on: two nodes changing under maxNodesChanging 1", got)
	}
	if got := specOf("n2"); got != halvesLayout {
		t.Errorf("n2 %q, want its new layout %s kept", got, halvesLayout)
	}
}

// staleRolloutCluster is the cluster of the stale-cache rollout tests:
// MigLayout a, maxNodesChanging 1, whole A100s to be halved, over n1, whose
// agent has not reported, and n2, on whole. It returns the client and n2
// as it starts.
func staleRolloutCluster(t *testing.T) (client.Client, *v1alpha1.NodeMigLayout) {
	t.Helper()
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	n1 := ownedBy(nodeMigLayout("n1").build(), ml)
	n2 := ownedBy(nodeMigLayout("n2").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, n2
}

// halveN2ThenReportN1 runs r's first pass over staleRolloutCluster, which
// gives n2 the new layout (n1 has nothing to change yet); n1's agent then
// reports its whole GPU, and r is left reading a cache that still shows n2
// as it started (stale), with c as the API reader it is behind.
func halveN2ThenReportN1(t *testing.T, c client.Client, r *Reconciler, stale *v1alpha1.NodeMigLayout) {
	t.Helper()
	if specs := specsAfterReconcile(t, c, r, "n2"); specs["n2"] != halvesLayout {
		t.Fatalf("first pass: n2 %q, want %s", specs["n2"], halvesLayout)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Status.GPUs = []v1alpha1.GPUStatus{a100(0).layout(wholeLayout).build()}
	if err := c.Status().Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	r.Client = &staleNodeMigLayouts{Client: c, stale: map[string]*v1alpha1.NodeMigLayout{"n2": stale}}
	r.APIReader = c
}

// TestRolloutExpectations: a write counts as unseen until the cache shows
// the object at its generation (or, where the write's generation is
// unknown, its layouts), the node is gone from the cache, or
// rolloutExpectTTL has passed; expectations of a MigLayout no pass looks
// at go once stale. A cache still at an earlier write with the same
// layouts (a rule reverted: halves written at generation 4, whole again at
// 5, the cache at 3 with whole) does not show the write.
func TestRolloutExpectations(t *testing.T) {
	t0 := h0()
	written := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}
	at := func(generation int64, layout string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Generation: generation, UID: "nml-1"},
			Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{specGPU(0, layout, "")}}}
	}
	// remade is the node's object deleted and made again since the
	// write: another UID, its generation started over.
	remade := func(generation int64, layout string) *v1alpha1.NodeMigLayout {
		o := at(generation, layout)
		o.UID = "nml-2"
		return o
	}
	tests := map[string]struct {
		generation int64 // of the write
		cached     map[string]*v1alpha1.NodeMigLayout
		after      time.Duration
		want       bool // n1 unseen
	}{
		"cache behind":                            {5, map[string]*v1alpha1.NodeMigLayout{"n1": at(3, wholeLayout)}, time.Second, true},
		"cache behind with the layouts written":   {5, map[string]*v1alpha1.NodeMigLayout{"n1": at(3, halvesLayout)}, time.Second, true},
		"cache shows the write":                   {5, map[string]*v1alpha1.NodeMigLayout{"n1": at(5, halvesLayout)}, time.Second, false},
		"cache shows a later write":               {5, map[string]*v1alpha1.NodeMigLayout{"n1": at(6, wholeLayout)}, time.Second, false},
		"generation unknown, cache behind":        {0, map[string]*v1alpha1.NodeMigLayout{"n1": at(3, wholeLayout)}, time.Second, true},
		"generation unknown, cache shows layouts": {0, map[string]*v1alpha1.NodeMigLayout{"n1": at(3, halvesLayout)}, time.Second, false},
		"node gone from the cache":                {5, map[string]*v1alpha1.NodeMigLayout{}, time.Second, false},
		"write older than the TTL":                {5, map[string]*v1alpha1.NodeMigLayout{"n1": at(3, wholeLayout)}, rolloutExpectTTL + time.Second, false},
		"object made again since":                 {5, map[string]*v1alpha1.NodeMigLayout{"n1": remade(1, wholeLayout)}, time.Second, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var e rolloutExpectations
			uid := types.UID("nml-1")
			if tc.generation == 0 {
				uid = "" // a write answered with an error: its object unknown too
			}
			e.expect("uid-a", "n1", written, uid, tc.generation, t0)
			unseen, expires := e.unseen("uid-a", tc.cached, t0.Add(tc.after))
			if got := unseen["n1"]; got != tc.want {
				t.Errorf("n1 unseen %t, want %t", got, tc.want)
			}
			if want := t0.Add(rolloutExpectTTL); tc.want && !expires.Equal(want) {
				t.Errorf("expires %v, want %v", expires, want)
			}
			if !tc.want && len(e.m) != 0 {
				t.Errorf("expectations kept: %v", e.m)
			}
		})
	}
	var e rolloutExpectations
	e.expect("uid-deleted", "n1", written, "", 2, t0)
	e.expect("uid-a", "n2", written, "", 2, t0.Add(rolloutExpectTTL+time.Second))
	if _, ok := e.m["uid-deleted"]; ok {
		t.Errorf("a stale expectation of a MigLayout no pass looks at is kept: %v", e.m)
	}
}
