package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestWrittenSpecOfAChange: a change for GPU 0, serving 40 pods, on a node
// whose spec lists GPU 1 already, is written as a GPUSpec among the
// others in index order, naming the first maxServedPods pods (the CRD's
// MaxItems: the API server refuses more), and the object is marked as
// written in Auto mode.
func TestWrittenSpecOfAChange(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").spec(v1alpha1.GPUSpec{Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}).
		status(a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0")).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, read.DeepCopy()).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	var serves []string
	for i := range 40 {
		serves = append(serves, fmt.Sprintf("ns/p%02d", i))
	}
	change := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("1g.10gb@0"), Serves: serves, Reason: "for 40 pods"}
	got := writeChangeOnN1(t, c, read, change, 1)
	want := []v1alpha1.GPUSpec{
		{Index: 0, MIGEnabled: true, Layout: "1g.10gb@0", Reason: "for 40 pods", ServedPods: serves[:maxServedPods]},
		{Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"},
	}
	if diff := cmp.Diff(want, got.Spec.GPUs); diff != "" {
		t.Errorf("n1's spec GPUs (-want +got):\n%s", diff)
	}
	if v := got.Annotations[v1alpha1.AnnotationSpecWrittenBy]; v != string(v1alpha1.ModeAuto) {
		t.Errorf("annotation %s = %q, want %q", v1alpha1.AnnotationSpecWrittenBy, v, v1alpha1.ModeAuto)
	}
}

// TestWriteDoesNotOverwriteASpecWrittenMeanwhile: between the write's read
// of n1 and its patch, another writer (the Static reconciler, taking the
// node over) writes n1's spec. The patch is made on the object as read, so
// it meets a conflict; read again, n1 is no longer as the plan read it, so
// the change is not written, and the other writer's spec stands.
func TestWriteDoesNotOverwriteASpecWrittenMeanwhile(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0")).build(), ml)
	theirs := v1alpha1.GPUSpec{Index: 1, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: "rule halves"}
	raced := false
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, read.DeepCopy()).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if !raced {
				raced = true
				var live v1alpha1.NodeMigLayout
				if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
					return err
				}
				live.Spec.GPUs = []v1alpha1.GPUSpec{theirs}
				if err := cl.Update(ctx, &live); err != nil {
					return err
				}
			}
			return cl.Patch(ctx, obj, p, opts...)
		}}).Build()
	change := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("1g.10gb@0"), Serves: []string{"ns/p"}}
	got := writeChangeOnN1(t, c, read, change, 0)
	if diff := cmp.Diff([]v1alpha1.GPUSpec{theirs}, got.Spec.GPUs); diff != "" {
		t.Errorf("n1's spec GPUs (-want +got):\n%s", diff)
	}
}

// TestWriteSkipsANodeOfAMigLayoutDeletedMeanwhile: n1 is still controlled
// by the MigLayout "auto" the plan read, but that MigLayout was deleted
// since and another one made under its name (in Auto mode too): the plan,
// made with the old one's policy, is not written on n1.
func TestWriteSkipsANodeOfAMigLayoutDeletedMeanwhile(t *testing.T) {
	old := autoMigLayout("auto", nil)
	old.UID = "uid-old"
	again := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0")).build(), old)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(again, read.DeepCopy()).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	change := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p"}}
	got := writeChangeOnN1(t, c, read, change, 0)
	if len(got.Spec.GPUs) != 0 {
		t.Errorf("n1's spec GPUs %v, want none written", got.Spec.GPUs)
	}
}

// writeChangeOnN1 writes change with the NodeMigLayout n1 as the plan read
// it (read), checks that want changes were written (0 or 1), and returns n1
// as stored.
func writeChangeOnN1(t *testing.T, c client.Client, read *v1alpha1.NodeMigLayout, change planner.Change, want int) v1alpha1.NodeMigLayout {
	t.Helper()
	a := &AutoPlanner{Client: c}
	if _, n, err := a.write(t.Context(), map[string]*v1alpha1.NodeMigLayout{"n1": read}, liveGenerations(t, c), []planner.Change{change}, nil, nil); err != nil || n != want {
		t.Errorf("write: %d written, error %v; want %d", n, err, want)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWriteSkipsAGPUNumberedAnewMeanwhile: the plan read GPU-A at index 0
// (no spec entry yet) and planned a change for it; before the write, the
// agent reported GPU-B there (NVML numbered the GPUs anew: only the status
// changed). The change is not written: stamped for GPU-B it would be
// applied to a GPU it was not planned for, and stamped for GPU-A the
// agent would refuse it; the next pass plans for GPU-B.
func TestWriteSkipsAGPUNumberedAnewMeanwhile(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").status(a100(0).uuid("GPU-A").layout("7g.80gb@0")).build(), ml)
	now := ownedBy(nodeMigLayout("n1").status(a100(0).uuid("GPU-B").layout("3g.40gb@0,3g.40gb@4")).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, now).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	change := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("1g.10gb@0"), Serves: []string{"ns/p"}}
	if got := writeChangeOnN1(t, c, read, change, 0); len(got.Spec.GPUs) != 0 {
		t.Errorf("n1's spec GPUs %+v, want none written", got.Spec.GPUs)
	}
	// Still GPU-A: written, stamped for it.
	c = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, read.DeepCopy()).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	got := writeChangeOnN1(t, c, read, change, 1)
	if len(got.Spec.GPUs) != 1 || got.Spec.GPUs[0].UUID != "GPU-A" {
		t.Errorf("n1's spec GPUs %+v, want one entry for GPU-A", got.Spec.GPUs)
	}
}
