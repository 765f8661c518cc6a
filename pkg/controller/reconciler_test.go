package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Reconcile against controller-runtime's fake client: which NodeMigLayouts
// are created, adopted, left alone and deleted. The real API server runs the
// same code in test/e2e.

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func staticMigLayout(name, uid, pool string) *v1alpha1.MigLayout {
	ml := migLayout(name).selects("pool", pool).build()
	ml.UID = types.UID(uid)
	ml.Spec.Mode = v1alpha1.ModeStatic
	ml.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2))
	return &ml
}

func ownedBy(nml *v1alpha1.NodeMigLayout, ml *v1alpha1.MigLayout) *v1alpha1.NodeMigLayout {
	nml.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: ml.Name, UID: ml.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	nml.Spec.MigLayout = ml.Name
	return nml
}

type nmlSummary struct {
	Owner string
	Spec  v1alpha1.NodeMigLayoutSpec
}

func TestReconcile(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "b")
	gone := staticMigLayout("gone", "uid-gone", "a")
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	tests := map[string]struct {
		objects []client.Object
		want    map[string]nmlSummary
		ready   metav1.ConditionStatus
		reason  string
	}{
		"creates a NodeMigLayout per selected node": {
			objects: []client.Object{a, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), node("x", nil)},
			want: map[string]nmlSummary{
				"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a"}},
				"n2": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a"}},
			},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAgentNotReporting,
		},
		"writes the desired layout once the agent reported": {
			objects: []client.Object{a, node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0")).build(), a)},
			want:  map[string]nmlSummary{"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a", GPUs: []v1alpha1.GPUSpec{halves}}}},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNodesNotReady,
		},
		"ready": {
			objects: []client.Object{a, node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").spec(halves).status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(), a)},
			want:  map[string]nmlSummary{"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a", GPUs: []v1alpha1.GPUSpec{halves}}}},
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonAllNodesReady,
		},
		"adopts the NodeMigLayout of a MigLayout that is gone": {
			objects: []client.Object{a, node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").status(a100(0)).build(), gone)},
			want:  map[string]nmlSummary{"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a", GPUs: []v1alpha1.GPUSpec{halves}}}},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNodesNotReady,
		},
		"releases a node no longer selected": {
			objects: []client.Object{a, node("n1", map[string]string{"pool": "elsewhere"}),
				ownedBy(nodeMigLayout("n1").build(), a)},
			want:  map[string]nmlSummary{},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNoNodes,
		},
		"leaves the NodeMigLayout of another MigLayout's node alone": {
			objects: []client.Object{a, b, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "b"}),
				ownedBy(nodeMigLayout("n2").build(), b)},
			want: map[string]nmlSummary{
				"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a"}},
				"n2": {"b", v1alpha1.NodeMigLayoutSpec{MigLayout: "b"}},
			},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAgentNotReporting,
		},
		"conflict: the node is left as it is": {
			objects: []client.Object{a, staticMigLayout("all", "uid-all", "a"), node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0")).build(), a)},
			want:  map[string]nmlSummary{"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a"}}},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNodesNotReady,
		},
		"auto mode: the NodeMigLayout is owned, its GPUs are the planner's": {
			objects: []client.Object{
				func() *v1alpha1.MigLayout {
					ml := migLayout("a").selects("pool", "a").build()
					ml.Spec.Mode = v1alpha1.ModeAuto
					return &ml
				}(),
				node("n1", map[string]string{"pool": "a"}),
			},
			want:  map[string]nmlSummary{"n1": {"a", v1alpha1.NodeMigLayoutSpec{MigLayout: "a"}}},
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonAgentNotReporting,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.objects...).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff(tc.want, listNodeMigLayouts(t, ctx, c)); diff != "" {
				t.Errorf("NodeMigLayouts (-want +got):\n%s", diff)
			}
			var ml v1alpha1.MigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &ml); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.ready || ready.Reason != tc.reason {
				t.Errorf("Ready = %+v, want %s/%s", ready, tc.ready, tc.reason)
			}
			// A second pass changes nothing.
			before := listNodeMigLayouts(t, ctx, c)
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatalf("second Reconcile: %v", err)
			}
			if diff := cmp.Diff(before, listNodeMigLayouts(t, ctx, c)); diff != "" {
				t.Errorf("second pass changed NodeMigLayouts (-before +after):\n%s", diff)
			}
		})
	}
}

func TestReconcileDeletedMigLayout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme()}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "nope"}}); err != nil {
		t.Fatalf("Reconcile of a missing MigLayout: %v", err)
	}
}

func listNodeMigLayouts(t *testing.T, ctx context.Context, c client.Client) map[string]nmlSummary {
	t.Helper()
	var list v1alpha1.NodeMigLayoutList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]nmlSummary{}
	for _, n := range list.Items {
		s := nmlSummary{Spec: n.Spec}
		if o := metav1.GetControllerOf(&n); o != nil {
			s.Owner = o.Name
		}
		out[n.Name] = s
	}
	return out
}

// TestSyncNodeWriteFails: a node whose new spec could not be written is judged
// against the spec it should hold, so it is not Ready on the strength of the
// old one.
func TestSyncNodeWriteFails(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
	existing := ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
		status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, existing).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return errors.New("the API server is unavailable")
		}}).Build()
	r := &Reconciler{Client: c, Scheme: testScheme(t)}
	nml, problems, _, err := r.syncNode(context.Background(), ml, "n1", existing, nil)
	if err == nil {
		t.Fatal("syncNode succeeded with every patch refused")
	}
	if st := EvaluateNode("n1", nml, problems, AgentHealth{}); st.Ready {
		t.Errorf("node evaluated Ready against the old spec: %+v", st.Row)
	}
}

// TestSyncNodeNotInCacheYet: a NodeMigLayout that exists but is not in the
// cache (another MigLayout's, being released, whose events do not come
// back to this one) is looked at again soon, not left until some unrelated
// event.
func TestSyncNodeNotInCacheYet(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	other := staticMigLayout("b", "uid-b", "b")
	existing := ownedBy(nodeMigLayout("n1").build(), other)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, other, existing).Build()
	r := &Reconciler{Client: c, Scheme: testScheme(t)}
	nml, _, wait, err := r.syncNode(context.Background(), ml, "n1", nil, nil)
	if err != nil || nml != nil || !wait {
		t.Errorf("syncNode of a node whose NodeMigLayout is not in the cache = %v, wait %v, %v; want nil, wait true, no error", nml, wait, err)
	}
}

// TestAutoModeRowsListEveryGPU: an Auto-mode MigLayout's node rows list the
// GPUs the agent reports, those no plan has changed yet (kept as they are:
// desired = actual) beside the one a plan changes.
func TestAutoModeRowsListEveryGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := migLayout("a").selects("pool", "a").build()
	ml.UID, ml.Spec.Mode = "uid-a", v1alpha1.ModeAuto
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(1, "3g.40gb@4", "serves ns/p")).
		status(a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0")).build(), &ml)
	got := reconcileOnce(t, ctx, &ml, node("n1", map[string]string{"pool": "a"}), nml)
	if len(got.Status.Nodes) != 1 {
		t.Fatalf("node rows %+v, want one", got.Status.Nodes)
	}
	want := []v1alpha1.GPURow{
		{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "7g.80gb@0", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseReady},
		{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@4", Actual: "7g.80gb@0", Phase: v1alpha1.PhasePending},
	}
	if diff := cmp.Diff(want, got.Status.Nodes[0].GPUs); diff != "" {
		t.Errorf("GPU rows of n1 (-want +got):\n%s", diff)
	}
}

// reconciledOnce runs one Reconcile of MigLayout "a" over objs and returns
// the client that holds them then.
func reconciledOnce(t *testing.T, ctx context.Context, objs ...client.Object) client.Client {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return c
}

// reconcileOnce runs one Reconcile of MigLayout "a" over objs and returns
// the MigLayout as it then is.
func reconcileOnce(t *testing.T, ctx context.Context, objs ...client.Object) v1alpha1.MigLayout {
	t.Helper()
	c := reconciledOnce(t, ctx, objs...)
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	return got
}
