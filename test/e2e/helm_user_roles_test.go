package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/miglayout/miglayout/deploy/helm"
)

// TestHelmUserRoles: the chart's ClusterRoles for people (rbac.userRoles),
// installed on the real API server with kube-controller-manager
// aggregating them, let a user bound to the built-in view ClusterRole read
// MigLayouts and NodeMigLayouts and change nothing; one bound to edit no
// more; one bound to <fullname>-editor change MigLayouts but not
// NodeMigLayouts (the controller's and the agents' to write).
func TestHelmUserRoles(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	sfx := rand.String(5)
	release := "ml-" + sfx
	r, err := helm.Render(helm.Options{ReleaseName: release, Namespace: "helm-" + sfx, KubeVersion: serverVersion(t)})
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	a := newApplier(t, cp.Config())
	editor := ""
	for _, o := range r.Objects {
		if o.GetKind() != "ClusterRole" || (o.GetName() != release+"-miglayout-viewer" && o.GetName() != release+"-miglayout-editor") {
			continue
		}
		if err := a.apply(ctx, o, false); err != nil {
			t.Fatalf("applying ClusterRole %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = a.delete(context.Background(), o) })
		if o.GetName() == release+"-miglayout-editor" {
			editor = o.GetName()
		}
	}
	if editor == "" {
		t.Fatalf("no ClusterRole %s-miglayout-editor rendered", release)
	}
	users := map[string]string{"viewer-" + sfx: "view", "editor-" + sfx: "edit", "operator-" + sfx: editor}
	for user, role := range users {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		})
	}
	type check struct {
		user, verb, resource string
		want                 bool
	}
	var checks []check
	for _, res := range []string{"miglayouts", "nodemiglayouts"} {
		for _, verb := range []string{"get", "list", "watch"} {
			for user := range users {
				checks = append(checks, check{user, verb, res, true})
			}
		}
		checks = append(checks,
			check{"viewer-" + sfx, "patch", res, false},
			check{"editor-" + sfx, "create", res, false},
			check{"editor-" + sfx, "patch", res, false},
			check{"operator-" + sfx, "create", res, res == "miglayouts"},
			check{"operator-" + sfx, "patch", res, res == "miglayouts"},
			check{"operator-" + sfx, "delete", res, res == "miglayouts"},
		)
	}
	checks = append(checks, check{"operator-" + sfx, "update", "miglayouts/status", false})
	allowed := func(c check) (bool, error) {
		ra := &authorizationv1.ResourceAttributes{Group: "miglayout.io", Verb: c.verb, Resource: c.resource}
		if res, sub, ok := strings.Cut(c.resource, "/"); ok {
			ra.Resource, ra.Subresource = res, sub
		}
		sar, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: c.user, ResourceAttributes: ra},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("reviewing access: %w", err)
		}
		return sar.Status.Allowed, nil
	}
	// The built-in roles take the chart's rules once kube-controller-
	// manager's aggregation controller has run; the grants below wait for
	// it, the refusals are then checked once.
	for _, c := range checks {
		if !c.want {
			continue
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return allowed(c)
		}); err != nil {
			t.Errorf("%s (bound to %s) may not %s %s: %v", c.user, users[c.user], c.verb, c.resource, err)
		}
	}
	for _, c := range checks {
		if c.want {
			continue
		}
		got, err := allowed(c)
		if err != nil {
			t.Fatal(err)
		}
		if got {
			t.Errorf("%s (bound to %s) may %s %s", c.user, users[c.user], c.verb, c.resource)
		}
	}
}
