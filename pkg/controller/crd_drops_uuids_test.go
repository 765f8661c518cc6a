package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSpecWrittenOnceWhereTheCRDDropsUUIDs: where the NodeMigLayout CRD is
// of an earlier release (the API server drops the entries' GPU UUIDs), a
// Static MigLayout's node is written once, not again on every reconcile
// for UUIDs the API server keeps dropping.
func TestSpecWrittenOnceWhereTheCRDDropsUUIDs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	nml := ownedBy(nodeMigLayout("n1").status(a100(0).uuid("GPU-0").layout(wholeLayout)).build(), ml)
	patches, pruning := 0, true
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if n, ok := obj.(*v1alpha1.NodeMigLayout); ok {
				patches++
				for i := range n.Spec.GPUs {
					if pruning {
						n.Spec.GPUs[i].UUID = "" // pruned: not in the CRD's schema
					}
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	reconcile := func(n int) {
		t.Helper()
		for range n {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	entry := func() v1alpha1.GPUSpec {
		t.Helper()
		var got v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.GPUs) != 1 {
			t.Fatalf("n1's spec %+v, want GPU 0's entry", got.Spec.GPUs)
		}
		return got.Spec.GPUs[0]
	}
	reconcile(3)
	if patches != 1 {
		t.Errorf("%d spec writes in 3 reconciles, want 1", patches)
	}
	if e := entry(); e.Layout == "" || e.UUID != "" {
		t.Errorf("GPU 0's entry %+v, want a layout and no UUID (dropped)", e)
	}

	// The CRDs applied: within uuidsRecheck nothing is written yet, after it
	// the entry gets its UUID.
	pruning = false
	now = now.Add(uuidsRecheck - time.Second)
	reconcile(1)
	if patches != 1 {
		t.Errorf("%d spec writes before uuidsRecheck, want still 1", patches)
	}
	now = now.Add(time.Second)
	reconcile(1)
	if e := entry(); e.UUID != "GPU-0" {
		t.Errorf("GPU 0's entry UUID %q once the CRD keeps it, want GPU-0", e.UUID)
	}
}

// TestOnlyAddsUUIDs: a write that only gives entries without a UUID one may
// be skipped while the API server drops them; one that changes an entry's
// UUID (written for another GPU), or anything else, may not.
func TestOnlyAddsUUIDs(t *testing.T) {
	nml := func(uuid, layout string) *v1alpha1.NodeMigLayout {
		return nodeMigLayout("n1").spec(v1alpha1.GPUSpec{Index: 0, UUID: uuid, MIGEnabled: true, Layout: layout}).build()
	}
	for name, tc := range map[string]struct {
		existing, next *v1alpha1.NodeMigLayout
		want           bool
	}{
		"adds a UUID":            {nml("", wholeLayout), nml("GPU-0", wholeLayout), true},
		"the same":               {nml("GPU-0", wholeLayout), nml("GPU-0", wholeLayout), true},
		"another GPU's UUID":     {nml("GPU-0", wholeLayout), nml("GPU-1", wholeLayout), false},
		"drops the UUID":         {nml("GPU-0", wholeLayout), nml("", wholeLayout), false},
		"another layout":         {nml("", wholeLayout), nml("GPU-0", halvesLayout), false},
		"an entry more or fewer": {nml("", wholeLayout), nodeMigLayout("n1").build(), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := onlyAddsUUIDs(tc.existing, tc.next); got != tc.want {
				t.Errorf("onlyAddsUUIDs = %t, want %t", got, tc.want)
			}
		})
	}
}
