package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestWriteJudgesEachCancelOnItsOwnGPU: two cancels on one node are each
// written only while their own GPU's change has destroyed nothing: the
// agent started on GPU 0 since the plan read the node, so GPU 0's cancel is
// not written, and GPU 1's still is.
func TestWriteJudgesEachCancelOnItsOwnGPU(t *testing.T) {
	ctx := context.Background()
	ml := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").spec(
		v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", ServedPods: []string{"ns/a"}},
		v1alpha1.GPUSpec{Index: 1, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", ServedPods: []string{"ns/b"}},
	).status(a100(0).layout("7g.80gb@0"), a100(1).layout("7g.80gb@0")).build(), ml)
	live := read.DeepCopy()
	live.Status.GPUs[0].Phase = v1alpha1.PhaseRepartitioning
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, live).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	var cancels []planner.Change
	for _, idx := range []int{0, 1} {
		x, ok := undestroyed(read, idx)
		if !ok {
			t.Fatalf("no cancel of GPU %d's change", idx)
		}
		cancels = append(cancels, x)
	}
	a := &AutoPlanner{Client: c}
	if _, n, err := a.write(ctx, map[string]*v1alpha1.NodeMigLayout{"n1": read}, liveGenerations(t, c), nil, cancels, nil); err != nil || n != 1 {
		t.Errorf("write: %d written, error %v; want 1 (GPU 1's cancel)", n, err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	layouts := map[int32]string{}
	for _, g := range got.Spec.GPUs {
		layouts[g.Index] = g.Layout
	}
	if diff := cmp.Diff(map[int32]string{0: "3g.40gb@0,3g.40gb@4", 1: "7g.80gb@0"}, layouts); diff != "" {
		t.Errorf("n1's desired layouts (-want +got):\n%s", diff)
	}
}

// TestWriteSkipsANodeOfAMigLayoutMadeAgain: a plan made for the nodes of
// MigLayout "auto" is not written on a node whose controller is now another
// MigLayout of the same name (deleted and created again since the plan
// read the node), though its spec reads the same: that MigLayout's policy
// was not planned with.
func TestWriteSkipsANodeOfAMigLayoutMadeAgain(t *testing.T) {
	old := autoMigLayout("auto", nil)
	old.UID = "uid-old"
	again := autoMigLayout("auto", nil)
	read := ownedBy(nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0")).build(), old)
	live := ownedBy(read.DeepCopy(), again)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(again, live).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	change := planner.Change{Node: "n1", GPU: 0, From: mig.MustParseLayout("7g.80gb@0"), To: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p"}}
	got := writeChangeOnN1(t, c, read, change, 0)
	if len(got.Spec.GPUs) != 0 {
		t.Errorf("n1's spec GPUs %v, want none written", got.Spec.GPUs)
	}
}
