package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// A node another MigLayout selects too has its changes not started dropped
// only where a's NodeMigLayout is there and a controls it, and only on the
// status judged: a change the agent started meanwhile (the cache behind
// its report) is not dropped on the retry. A write that fails is returned.
func TestDropUnstartedOnConflictGuards(t *testing.T) {
	writeFailed := errors.New("API server unavailable")
	for name, tc := range map[string]struct {
		// owner of n1's NodeMigLayout; "" for none there.
		owner string
		// started: the agent reports the change started past the cache.
		started   bool
		failWrite bool
		wantGPU0  string
		wantErr   error
	}{
		"a's, not started":            {owner: "a", wantGPU0: wholeLayout},
		"no NodeMigLayout":            {},
		"b's":                         {owner: "b", wantGPU0: halvesLayout},
		"a's, started past the cache": {owner: "a", started: true, wantGPU0: halvesLayout},
		"a's, the write fails":        {owner: "a", failWrite: true, wantGPU0: halvesLayout, wantErr: writeFailed},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "a")
			owners := map[string]*v1alpha1.MigLayout{"a": a, "b": b}
			objs := []client.Object{a, b}
			if tc.owner != "" {
				objs = append(objs, ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).
					status(a100(0).layout(wholeLayout)).build(), owners[tc.owner]))
			}
			builder := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{})
			if tc.failWrite {
				builder = builder.WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return writeFailed
				}})
			}
			c := builder.Build()
			var existing *v1alpha1.NodeMigLayout
			if tc.owner != "" {
				existing = &v1alpha1.NodeMigLayout{}
				if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, existing); err != nil {
					t.Fatal(err)
				}
			}
			if tc.started {
				reportedPastTheCache(t, c, func(st []v1alpha1.GPUStatus) {
					st[0].Phase, st[0].Reason = v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning
				})
			}
			r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme()}
			err := r.dropUnstartedOwned(ctx, a, existing, dropForConflict)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.started:
				if !apierrors.IsConflict(err) {
					t.Errorf("err = %v, want the conflict returned", err)
				}
			case err != nil:
				t.Errorf("err = %v, want none", err)
			}
			if tc.owner == "" {
				return
			}
			var stored v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stored); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantGPU0, stored.Spec.GPUs[0].Layout); diff != "" {
				t.Errorf("n1's GPU 0 spec (-want +got):\n%s", diff)
			}
		})
	}
}
