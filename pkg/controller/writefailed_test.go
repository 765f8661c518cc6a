package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

// TestNodeMigLayoutWriteRefused: where the API server refuses to create a
// node's NodeMigLayout or to write its spec (an admission webhook, a
// policy, RBAC), the node's row is Failed with the refusal, Degraded is
// NodeMigLayoutWriteFailed naming the node, the node is not counted on the
// way, and one Warning event tells it while the refusal lasts; a write that
// only timed out is not reported so (it is retried). Once the write goes
// through, the node is judged as usual.
func TestNodeMigLayoutWriteRefused(t *testing.T) {
	refused := apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "nodemiglayouts"}, "n1",
		errors.New(`admission webhook "policy.example.com" denied the request`))
	for name, tc := range map[string]struct {
		exists   bool // the NodeMigLayout exists: its spec write is refused, else its create
		err      error
		reported bool
	}{
		"create refused":     {err: refused, reported: true},
		"spec write refused": {exists: true, err: refused, reported: true},
		"create timed out":   {err: apierrors.NewTimeoutError("the server was slow", 1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
			objs := []client.Object{ml, node("n1", map[string]string{"pool": "a"})}
			if tc.exists {
				objs = append(objs, ownedBy(nodeMigLayout("n1").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
					status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(), ml))
			}
			refusing := true
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).
				WithInterceptorFuncs(interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && refusing {
							return tc.err
						}
						return c.Create(ctx, obj, opts...)
					},
					Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
						if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && refusing {
							return tc.err
						}
						return c.Patch(ctx, obj, p, opts...)
					},
				}).Build()
			rec := events.NewFakeRecorder(20)
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
			status := func() v1alpha1.MigLayoutStatus {
				t.Helper()
				_, _ = r.Reconcile(ctx, req) // fails while the write is refused
				var got v1alpha1.MigLayout
				if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
					t.Fatal(err)
				}
				return got.Status
			}
			warnings := func() int {
				n := 0
				for len(rec.Events) > 0 {
					if e := <-rec.Events; strings.Contains(e, EventNodeMigLayoutWriteFailed) {
						n++
					}
				}
				return n
			}
			for pass := range 2 {
				st := status()
				degraded := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
				progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
				if len(st.Nodes) != 1 || degraded == nil || progressing == nil {
					t.Fatalf("pass %d: status %+v", pass, st)
				}
				row := st.Nodes[0]
				named := degraded.Reason == v1alpha1.ReasonNodeMigLayoutWriteFailed && strings.Contains(degraded.Message, "node n1") && strings.Contains(degraded.Message, "denied the request")
				failedRow := row.Phase == v1alpha1.PhaseFailed && strings.HasPrefix(row.Message, msgWriteFailed) && strings.Contains(row.Message, "denied the request")
				if named != tc.reported || failedRow != tc.reported {
					t.Errorf("pass %d: Degraded %s %q, row %s %q; want the refusal reported: %t", pass, degraded.Reason, degraded.Message, row.Phase, row.Message, tc.reported)
				}
				if tc.reported && progressing.Status == "True" {
					t.Errorf("pass %d: Progressing %q while the node's spec cannot be written", pass, progressing.Message)
				}
				want := 0
				if tc.reported && pass == 0 {
					want = 1
				}
				if got := warnings(); got != want {
					t.Errorf("pass %d: %d %s events, want %d", pass, got, EventNodeMigLayoutWriteFailed, want)
				}
			}
			refusing = false
			st := status()
			if d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); d.Reason == v1alpha1.ReasonNodeMigLayoutWriteFailed || strings.HasPrefix(st.Nodes[0].Message, msgWriteFailed) {
				t.Errorf("once written: Degraded %s %q, row %q; want the refusal gone", d.Reason, d.Message, st.Nodes[0].Message)
			}
		})
	}
}
