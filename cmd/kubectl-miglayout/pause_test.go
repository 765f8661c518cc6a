package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestPauseAllAndSelector: --all acts on every MigLayout and -l on those
// whose labels match, in name order; names, --all and -l are one of three,
// and a selector that does not parse changes nothing; a name that does not
// exist is an error naming it, and the others named are acted on.
func TestPauseAllAndSelector(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		out    string
		err    string
		paused []string // the MigLayouts paused after the command (of a, b, c; b paused before)
	}{
		"pause --all":            {args: []string{"pause", "--all"}, out: "miglayout a paused\nmiglayout b is paused already\nmiglayout c paused\n", paused: []string{"a", "b", "c"}},
		"resume --all":           {args: []string{"resume", "--all"}, out: "miglayout a is not paused\nmiglayout b resumed\nmiglayout c is not paused\n"},
		"pause -l":               {args: []string{"pause", "-l", "team=ml"}, out: "miglayout a paused\nmiglayout c paused\n", paused: []string{"a", "b", "c"}},
		"pause --selector !team": {args: []string{"pause", "--selector", "!team"}, out: "miglayout b is paused already\n", paused: []string{"b"}},
		"no match":               {args: []string{"pause", "-l", "team=none"}, out: "no MigLayout matches\n", paused: []string{"b"}},
		"names and --all":        {args: []string{"pause", "a", "--all"}, err: "one of the three", paused: []string{"b"}},
		"--all and -l":           {args: []string{"resume", "--all", "-l", "team=ml"}, err: "one of the three", paused: []string{"b"}},
		"nothing":                {args: []string{"resume"}, err: "one of the three", paused: []string{"b"}},
		"bad selector":           {args: []string{"pause", "-l", "team in (ml"}, err: `parsing -l "team in (ml"`, paused: []string{"b"}},
		"unknown name among":     {args: []string{"pause", "a", "nope", "c"}, out: "miglayout a paused\nmiglayout c paused\n", err: "MigLayout nope not found", paused: []string{"a", "b", "c"}},
		"unknown names only":     {args: []string{"resume", "nope", "b2"}, err: "MigLayout nope not found", paused: []string{"b"}},
		"a name twice":           {args: []string{"pause", "a", "a"}, out: "miglayout a paused\n", paused: []string{"a", "b"}},
		"blank selector":         {args: []string{"pause", "-l", " "}, err: "selects every MigLayout: use --all", paused: []string{"b"}},
		"empty selector":         {args: []string{"resume", "--selector="}, err: "selects every MigLayout: use --all", paused: []string{"b"}},
		"names and --selector=":  {args: []string{"pause", "a", "--selector="}, err: "one of the three", paused: []string{"b"}},
		"--all and --selector=":  {args: []string{"resume", "--all", "--selector="}, err: "one of the three", paused: []string{"b"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"team": "ml"}}},
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "ml"}}},
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.MigLayoutSpec{Paused: true}},
			).Build()
			cmd := newRootCommandEnv(&env{newClient: func() (client.Client, error) { return c, nil }})
			var out strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&strings.Builder{})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.out, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			var list v1alpha1.MigLayoutList
			if err := c.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			var paused []string
			for _, ml := range list.Items {
				if ml.Spec.Paused {
					paused = append(paused, ml.Name)
				}
			}
			if diff := cmp.Diff(tc.paused, paused); diff != "" {
				t.Errorf("paused MigLayouts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPauseGoesOnPastAFailedPatch: a MigLayout whose patch fails does not
// keep the others from being paused (or resumed); the error names it, and
// each of the others is printed.
func TestPauseGoesOnPastAFailedPatch(t *testing.T) {
	for _, verb := range []string{"pause", "resume"} {
		t.Run(verb, func(t *testing.T) {
			was := verb == "resume"
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.MigLayoutSpec{Paused: was}},
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.MigLayoutSpec{Paused: was}},
				&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.MigLayoutSpec{Paused: was}},
			).WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetName() == "b" {
					return errors.New("etcdserver: request timed out")
				}
				return c.Patch(ctx, obj, patch, opts...)
			}}).Build()
			cmd := newRootCommandEnv(&env{newClient: func() (client.Client, error) { return c, nil }})
			var out strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&strings.Builder{})
			cmd.SetArgs([]string{verb, "--all"})
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), "setting spec.paused of MigLayout b: etcdserver: request timed out") {
				t.Errorf("error %v, want one naming b's failed patch", err)
			}
			word := map[string]string{"pause": "paused", "resume": "resumed"}[verb]
			if diff := cmp.Diff("miglayout a "+word+"\nmiglayout c "+word+"\n", out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			var list v1alpha1.MigLayoutList
			if err := c.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, ml := range list.Items {
				got[ml.Name] = ml.Spec.Paused
			}
			if diff := cmp.Diff(map[string]bool{"a": !was, "b": was, "c": !was}, got); diff != "" {
				t.Errorf("spec.paused after %s (-want +got):\n%s", verb, diff)
			}
		})
	}
}

// TestPauseRefusedWhereTheCRDPrunesPaused: on an API server whose MigLayout
// CRD predates spec.paused, the patch succeeds but the field is pruned: the
// pause must fail, naming the CRD, not print "paused".
func TestPauseRefusedWhereTheCRDPrunesPaused(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
		&v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
	).WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		// Pruned: the object as stored, unchanged.
		return c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}}).Build()
	cmd := newRootCommandEnv(&env{newClient: func() (client.Client, error) { return c, nil }})
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&strings.Builder{})
	cmd.SetArgs([]string{"pause", "a"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "CRD predates spec.paused") {
		t.Errorf("error %v, want one saying the CRD predates spec.paused", err)
	}
	if strings.Contains(out.String(), "paused") {
		t.Errorf("output %q says paused", out.String())
	}
}
