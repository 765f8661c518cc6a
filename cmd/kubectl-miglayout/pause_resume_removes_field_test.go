package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPauseAndResumePatches: pause sends a merge patch that sets
// spec.paused, and resume one that removes the field (null), not one that
// stores paused: false, so that a resumed MigLayout reads as one never
// paused (a GitOps tool's copy, which lacks the field, shows no
// difference). The fake client, typed, cannot tell false from absent: the
// patch sent is what is compared.
func TestPauseAndResumePatches(t *testing.T) {
	var sent []string
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
		&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
	).WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		data, err := patch.Data(obj)
		if err != nil {
			return err
		}
		sent = append(sent, string(patch.Type())+" "+string(data))
		return c.Patch(ctx, obj, patch, opts...)
	}}).Build()
	for _, verb := range []string{"pause", "resume"} {
		cmd := newRootCommandEnv(&env{newClient: func() (client.Client, error) { return c, nil }})
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		cmd.SetArgs([]string{verb, "a"})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%s a: %v", verb, err)
		}
	}
	want := []string{
		`application/merge-patch+json {"spec":{"paused":true}}`,
		`application/merge-patch+json {"spec":{"paused":null}}`,
	}
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Errorf("patches sent (-want +got):\n%s", diff)
	}
}
