package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanDryRunCreateSendsNoStoredFields: a MigLayout as kubectl get
// writes it (uid, resourceVersion, status) is sent to the API server's dry
// run without them, as kubectl apply sends it: an API server refuses a
// create that sets a resourceVersion.
func TestPlanDryRunCreateSendsNoStoredFields(t *testing.T) {
	f := filepath.Join(t.TempDir(), "got.yaml")
	doc := `apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata: {name: halves, uid: 0b5a7c1e-aaaa-bbbb-cccc-000000000001, resourceVersion: "7", generation: 3}
spec:
  nodeSelector: {matchLabels: {pool: gpu}}
  rules:
  - {name: halves, productName: A100-SXM4-80GB, profiles: {3g.40gb: 2}}
status:
  observedGeneration: 3
`
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var sent *unstructured.Unstructured
	_, _, err := runIntercepted(t, cluster(t), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
				sent = u.DeepCopy()
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if sent == nil {
		t.Fatal("plan asked the API server nothing")
	}
	if _, ok := sent.Object["status"]; ok || sent.GetUID() != "" || sent.GetResourceVersion() != "" {
		t.Errorf("dry-run create sent status %v, uid %q, resourceVersion %q; want none of them", sent.Object["status"], sent.GetUID(), sent.GetResourceVersion())
	}
}

// TestPlanDryRunUpdatesAStoredMigLayout: a MigLayout of the name exists, so
// plan asks the API server about a dry-run update of it (at its
// resourceVersion), and a 403 of that update that RBAC allows (asked for
// the verb update) is admission refusing it: plan refuses it too.
func TestPlanDryRunUpdatesAStoredMigLayout(t *testing.T) {
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Spec: v1alpha1.MigLayoutSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}},
			Rules: []v1alpha1.LayoutRule{{Name: "halves", Profiles: map[string]int32{"3g.40gb": 2}}}}}
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}, "halves",
		errors.New("ValidatingAdmissionPolicy 'site-rules' denied request: no sevenths"))
	var reviewed []string
	var updated *unstructured.Unstructured
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(append(cluster(t), stored)...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				reviewed = append(reviewed, review.Spec.ResourceAttributes.Verb)
				// RBAC: update allowed, create not.
				review.Status.Allowed = review.Spec.ResourceAttributes.Verb == "update"
				return nil
			}
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
				// As the API server answers a create of a name it holds.
				return apierrors.NewAlreadyExists(schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}, obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
				o := &client.UpdateOptions{}
				o.ApplyOptions(opts)
				if len(o.DryRun) == 0 {
					t.Errorf("plan updated %s for real", obj.GetName())
				}
				updated = u.DeepCopy()
				return denied
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	var cur v1alpha1.MigLayout
	if err := c.Get(context.Background(), client.ObjectKey{Name: "halves"}, &cur); err != nil {
		t.Fatal(err)
	}
	e := &env{now: func() time.Time { return time.Unix(1060, 0) }, newClient: func() (client.Client, error) { return c, nil }}
	cmd := newRootCommandEnv(e)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"plan", "-f", "testdata/plan-static.yaml"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "would be refused by the API server") || !strings.Contains(err.Error(), "site-rules") {
		t.Errorf("plan: %v, want it refused with the admission's reason; stderr %q", err, errOut.String())
	}
	if updated == nil {
		t.Fatal("plan asked the API server about no update")
	}
	if got := updated.GetResourceVersion(); got == "" || got != cur.ResourceVersion {
		t.Errorf("dry-run update at resourceVersion %q, want the stored one's %q", got, cur.ResourceVersion)
	}
	if !slices.Equal(reviewed, []string{"update"}) {
		t.Errorf("access reviews of verbs %q, want [update]", reviewed)
	}
}
