package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestClearXids: clear-xids writes a request the agent parses to each
// named Node's annotation, keeping the Node's other annotations, with the
// GPUs of --gpu sorted and each once, or none (every GPU); a node that
// does not exist is an error naming it and does not stop the others; each
// run is a request of a new ID.
func TestClearXids(t *testing.T) {
	tests := map[string]struct {
		args     []string
		wantGPUs map[string][]int // by node annotated
		wantOut  []string
		// wantNoOut is not in the output.
		wantNoOut string
		wantErr   string
	}{
		"every GPU of two nodes": {args: []string{"clear-xids", "a", "b"},
			wantGPUs: map[string][]int{"a": nil, "b": nil},
			wantOut:  []string{"node a: clearing the Xid marks of every GPU requested", "node b: clearing the Xid marks of every GPU requested"}},
		"some GPUs": {args: []string{"clear-xids", "a", "--gpu", "3,1", "--gpu", "1"},
			wantGPUs: map[string][]int{"a": {1, 3}},
			wantOut:  []string{"node a: clearing the Xid marks of GPUs [1 3] requested", "node a: warning: its agent reports no GPU of index [3] (NodeMigLayout status): check --gpu"}},
		"GPUs of a node without a NodeMigLayout": {args: []string{"clear-xids", "b", "--gpu", "7"},
			wantGPUs: map[string][]int{"b": {7}},
			wantOut:  []string{"node b: clearing the Xid marks of GPUs [7] requested"}, wantNoOut: "warning"},
		"GPUs all reported": {args: []string{"clear-xids", "a", "--gpu", "0,1"},
			wantGPUs: map[string][]int{"a": {0, 1}}, wantNoOut: "warning"},
		"unknown node": {args: []string{"clear-xids", "nope", "b"},
			wantGPUs: map[string][]int{"b": nil},
			wantOut:  []string{"node b: clearing"}, wantErr: `reading Node nope: nodes "nope" not found`},
		"no node":      {args: []string{"clear-xids"}, wantGPUs: map[string][]int{}, wantErr: "name at least one node"},
		"negative GPU": {args: []string{"clear-xids", "a", "--gpu", "-1"}, wantGPUs: map[string][]int{}, wantErr: "--gpu -1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"example.com/keep": "yes"}}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
				&v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "a"},
					Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0}, {Index: 1}}}}).Build()
			run := func() (string, error) {
				cmd := newRootCommandEnv(&env{newClient: func() (client.Client, error) { return c, nil }})
				var out strings.Builder
				cmd.SetOut(&out)
				cmd.SetErr(&out)
				cmd.SetArgs(tc.args)
				err := cmd.Execute()
				return out.String(), err
			}
			requests := func() (gpus map[string][]int, ids map[string]bool) {
				gpus, ids = map[string][]int{}, map[string]bool{}
				for _, name := range []string{"a", "b"} {
					var n corev1.Node
					if err := c.Get(context.Background(), types.NamespacedName{Name: name}, &n); err != nil {
						t.Fatal(err)
					}
					if name == "a" && n.Annotations["example.com/keep"] != "yes" {
						t.Errorf("node a's other annotation lost: %v", n.Annotations)
					}
					value, ok := n.Annotations[v1alpha1.AnnotationClearXids]
					if !ok {
						continue
					}
					req, err := v1alpha1.ParseClearXidsRequest(value)
					if err != nil {
						t.Fatalf("node %s: %v", name, err)
					}
					gpus[name] = req.GPUs
					ids[req.ID] = true
					if req.RequestedAt == nil || time.Since(req.RequestedAt.Time) > time.Minute || time.Until(req.RequestedAt.Time) > time.Second {
						t.Errorf("node %s: request time %v, want now", name, req.RequestedAt)
					}
				}
				return gpus, ids
			}
			out, err := run()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, line := range tc.wantOut {
				if !strings.Contains(out, line) {
					t.Errorf("output %q lacks %q", out, line)
				}
			}
			if tc.wantNoOut != "" && strings.Contains(out, tc.wantNoOut) {
				t.Errorf("output %q has %q", out, tc.wantNoOut)
			}
			gotGPUs, ids := requests()
			if diff := cmp.Diff(tc.wantGPUs, gotGPUs); diff != "" {
				t.Errorf("requests by node (-want +got):\n%s", diff)
			}
			if len(gotGPUs) == 0 {
				return
			}
			if len(ids) != 1 {
				t.Fatalf("request IDs %v, want one for the run", ids)
			}
			// Run again: a request of a new ID.
			if _, err := run(); tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			_, again := requests()
			for id := range again {
				if ids[id] {
					t.Errorf("second run's request ID %s is the first's", id)
				}
			}
		})
	}
}

// TestClearXidsCarriesTheRequestItReplaces: a request written over one the
// agent may not have read yet carries it, also when the other was written
// between this one's read of the Node and its write (the write is
// conditional and read again).
func TestClearXidsCarriesTheRequestItReplaces(t *testing.T) {
	first := v1alpha1.ClearXidsRequest{ID: "first", GPUs: []int{0}, RequestedAt: &metav1.Time{Time: time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)}}
	other := v1alpha1.ClearXidsRequest{ID: "other", GPUs: []int{2}, RequestedAt: &metav1.Time{Time: time.Date(2026, 12, 6, 20, 10, 0, 0, time.UTC)}}
	encode := func(r v1alpha1.ClearXidsRequest) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := map[string]struct {
		// meanwhile is written to the annotation between the first read
		// and the first write, where set.
		meanwhile *v1alpha1.ClearXidsRequest
		want      []v1alpha1.ClearXidsPart
		wantOut   string
	}{
		"request already there": {
			want:    []v1alpha1.ClearXidsPart{{GPUs: []int{0}, RequestedAt: first.RequestedAt}},
			wantOut: "node a: clearing the Xid marks of GPUs [1] requested (id new), carrying the earlier requests the agent may not have read (GPUs [0] as of 2026-12-06T20:00:00Z)",
		},
		"request written meanwhile": {meanwhile: &other,
			want: []v1alpha1.ClearXidsPart{{GPUs: []int{2}, RequestedAt: other.RequestedAt}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			patches := 0
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{v1alpha1.AnnotationClearXids: encode(first)}}}).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if patches++; patches == 1 && tc.meanwhile != nil {
						var n corev1.Node
						if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &n); err != nil {
							return err
						}
						n.Annotations[v1alpha1.AnnotationClearXids] = encode(*tc.meanwhile)
						if err := c.Update(ctx, &n); err != nil {
							return err
						}
					}
					return c.Patch(ctx, obj, patch, opts...)
				}}).Build()
			var out strings.Builder
			req := v1alpha1.ClearXidsRequest{ID: "new", GPUs: []int{1}, RequestedAt: &metav1.Time{Time: time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)}}
			if err := requestClearXids(t.Context(), c, &out, []string{"a"}, req); err != nil {
				t.Fatal(err)
			}
			var n corev1.Node
			if err := c.Get(t.Context(), types.NamespacedName{Name: "a"}, &n); err != nil {
				t.Fatal(err)
			}
			got, err := v1alpha1.ParseClearXidsRequest(n.Annotations[v1alpha1.AnnotationClearXids])
			if err != nil {
				t.Fatal(err)
			}
			want := req
			want.Earlier = tc.want
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request written (-want +got):\n%s", diff)
			}
			if tc.wantOut != "" && !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output %q lacks %q", out.String(), tc.wantOut)
			}
		})
	}
}
