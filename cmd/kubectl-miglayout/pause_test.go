package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPauseAndResume: pause sets spec.paused of each MigLayout named (one
// paused already is said to be), resume unsets it, and an unknown name is
// an error that names it.
func TestPauseAndResume(t *testing.T) {
	mls := []client.Object{
		&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.MigLayoutSpec{Paused: true}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(mls...).Build()
	run := func(args ...string) (string, error) {
		e := &env{newClient: func() (client.Client, error) { return c, nil }}
		cmd := newRootCommandEnv(e)
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	paused := func() map[string]bool {
		var list v1alpha1.MigLayoutList
		if err := c.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, ml := range list.Items {
			out[ml.Name] = ml.Spec.Paused
		}
		return out
	}

	out, err := run("pause", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("miglayout a paused\nmiglayout b is paused already\n", out); diff != "" {
		t.Errorf("pause output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": true}, paused()); diff != "" {
		t.Errorf("after pause (-want +got):\n%s", diff)
	}
	if out, err = run("resume", "b"); err != nil || out != "miglayout b resumed\n" {
		t.Errorf("resume b: %q, %v", out, err)
	}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": false}, paused()); diff != "" {
		t.Errorf("after resume (-want +got):\n%s", diff)
	}
	if out, err = run("resume", "b"); err != nil || out != "miglayout b is not paused\n" {
		t.Errorf("resume b again: %q, %v", out, err)
	}
	if _, err := run("resume", "nope"); err == nil || !strings.Contains(err.Error(), "MigLayout nope not found") {
		t.Errorf("resume of an unknown MigLayout: %v, want it named as not found", err)
	}
	if _, err := run("pause"); err == nil {
		t.Error("pause with no name: no error")
	}
}
