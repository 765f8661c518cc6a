package controller

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRolloutRenumberedNode: n1 holds the only slot. NVML numbered n2's
// GPUs anew: at index 0 is GPU B, and the agent refuses the entry there,
// written for GPU A (SpecForAnotherGPU), changing nothing. The entry for B
// is a new change where B is whole: it waits for the slot, and is written
// once n1 is done. Where B holds the layout already, it changes nothing and
// is written at once.
func TestRolloutRenumberedNode(t *testing.T) {
	tests := map[string]struct {
		// layoutB is what GPU B holds.
		layoutB string
		// atOnce: B's entry is written while n1 holds the slot.
		atOnce bool
	}{
		"whole: waits for the slot": {layoutB: wholeLayout},
		"on its layout: takes none": {layoutB: halvesLayout, atOnce: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.MaxNodesChanging = ptr.To[int32](1)
			withUUID := func(uuid string, b *gpuBuilder) *gpuBuilder { b.g.UUID = uuid; return b }
			entry := func(uuid, layout string) v1alpha1.GPUSpec {
				s := specGPU(0, layout, "")
				s.UUID = uuid
				return s
			}
			n1 := ownedBy(nodeMigLayout("n1").spec(entry("X", halvesLayout)).
				status(withUUID("X", a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", ""))).build(), ml)
			n2 := ownedBy(nodeMigLayout("n2").spec(entry("A", halvesLayout)).
				status(withUUID("B", a100(0).layout(tc.layoutB).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "the entry is for GPU A"))).build(), ml)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(ml, node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), n1, n2).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(1000)}
			reconcile := func() {
				t.Helper()
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
					t.Fatal(err)
				}
			}
			n2Entry := func() v1alpha1.GPUSpec {
				t.Helper()
				var got v1alpha1.NodeMigLayout
				if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &got); err != nil {
					t.Fatal(err)
				}
				return got.Spec.GPUs[0]
			}
			reconcile()
			if e := n2Entry(); (e.UUID == "B") != tc.atOnce {
				t.Fatalf("n2's entry %+v while n1 holds the only slot, want it for B %v", e, tc.atOnce)
			}
			if tc.atOnce {
				return
			}
			// n1 is done: n2 gets its slot.
			var done v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &done); err != nil {
				t.Fatal(err)
			}
			done.Status.GPUs[0].Phase, done.Status.GPUs[0].Layout = v1alpha1.PhaseReady, halvesLayout
			if err := c.Status().Update(ctx, &done); err != nil {
				t.Fatal(err)
			}
			reconcile()
			if e := n2Entry(); e.UUID != "B" || e.Layout != halvesLayout {
				t.Errorf("n2's entry %+v once n1 is done, want halves for B", e)
			}
		})
	}
}

// TestRolloutRefusedWriteGivesSlotBack: the API server refuses every write
// of n1's spec (an admission policy, say). The slot it was given goes to
// the next node, so that the rollout does not stall behind a node that
// changes nothing.
func TestRolloutRefusedWriteGivesSlotBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml}
	for _, n := range []string{"n1", "n2", "n3"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && obj.GetName() == "n1" {
				return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "nodemiglayouts"}, "n1", nil)
			}
			return cl.Patch(ctx, obj, p, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(1000)}
	for range 2 {
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}) // the refused write: an error
	}
	want := map[string]string{"n1": wholeLayout, "n2": halvesLayout, "n3": wholeLayout}
	for n, layout := range want {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		if got := nml.Spec.GPUs[0].Layout; got != layout {
			t.Errorf("%s spec %s, want %s", n, got, layout)
		}
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	for _, row := range got.Status.Nodes {
		if row.Node == "n3" && (!strings.Contains(row.Message, "changing now: n2") || strings.Contains(row.Message, "n1")) {
			t.Errorf("n3's row %q, want it waiting for n2 alone", row.Message)
		}
	}
}
