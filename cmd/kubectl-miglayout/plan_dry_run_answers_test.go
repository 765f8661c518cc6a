package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestPlanDryRunAnswers: a dry run the API server answers with a bad
// request (a document it cannot decode) refuses the MigLayout, as kubectl
// apply would be refused; a 403 whose access review cannot be made is not
// taken for admission: plan warns that it could not check and plans the
// MigLayout as given.
func TestPlanDryRunAnswers(t *testing.T) {
	gr := schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}
	for name, tc := range map[string]struct {
		answer   error
		review   error
		wantErr  string
		wantWarn string
	}{
		"a bad request": {answer: apierrors.NewBadRequest(`MigLayout in version "v1alpha1" cannot be handled: spec.rules: expected list`),
			wantErr: "would be refused by the API server"},
		"a 403 whose access review fails": {answer: apierrors.NewForbidden(gr, "halves", errors.New("no create")),
			review: apierrors.NewForbidden(authorizationv1.Resource("selfsubjectaccessreviews"), "", errors.New("no review")), wantWarn: "was not checked by the API server"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runIntercepted(t, cluster(t), interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
						review.Status.Allowed = true
						return tc.review
					}
					if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
						return tc.answer
					}
					return c.Create(ctx, obj, opts...)
				},
			}, "plan", "-f", "testdata/plan-static.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("plan: %v, want an error saying %q; planned:\n%s", err, tc.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v, want it planned as given", err)
			}
			if !strings.Contains(errOut, tc.wantWarn) || !strings.Contains(out, "Summary: ") {
				t.Errorf("stderr %q, want %q, and the plan:\n%s", errOut, tc.wantWarn, out)
			}
		})
	}
}
