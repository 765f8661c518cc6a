package controller

import (
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// halvingChanges are planned changes of GPU 0 of each node, from a whole
// A100 to two 3g.40gb devices, each serving one pod.
func halvingChanges(nodes ...string) []planner.Change {
	var changes []planner.Change
	for _, node := range nodes {
		changes = append(changes, planner.Change{Node: node, GPU: 0, From: mig.MustParseLayout("7g.80gb@0"),
			To: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Serves: []string{"ns/p-" + node}})
	}
	return changes
}

// TestWriteSkipsANodeAdoptedByTheMigLayoutMadeAgain: MigLayout "auto" was
// deleted and made again (another UID) while a plan read its nodes: the
// cache showed n1 still controlled by the old one, n2 by the new one. By the
// write, the new one has adopted n1 too (its spec unchanged). The new
// MigLayout is Auto mode and not paused, and n2's change is written; n1's
// was planned for the old one's node and is not.
func TestWriteSkipsANodeAdoptedByTheMigLayoutMadeAgain(t *testing.T) {
	old, again := autoMigLayout("auto", nil), autoMigLayout("auto", nil)
	old.UID = "uid-old"
	read := map[string]*v1alpha1.NodeMigLayout{
		"n1": autoNML("n1", old, a100(0).layout("7g.80gb@0")),
		"n2": autoNML("n2", again, a100(0).layout("7g.80gb@0")),
	}
	adopted := ownedBy(read["n1"].DeepCopy(), again)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(again, adopted, read["n2"].DeepCopy()).
		WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	changes := halvingChanges("n1", "n2")
	a := &AutoPlanner{Client: c}
	if _, n, err := a.write(t.Context(), read, liveGenerations(t, c), changes, nil, nil); err != nil || n != 1 {
		t.Errorf("write: %d written, error %v; want 1 (n2's change)", n, err)
	}
	wantSpecGPUs(t, c, map[string]int{"n1": 0, "n2": 1})
}

// TestWriteReadsEachMigLayoutOnce: a plan's changes on three nodes of one
// Auto MigLayout read that MigLayout from the API server once before they
// are written, not once per node.
func TestWriteReadsEachMigLayoutOnce(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	read := map[string]*v1alpha1.NodeMigLayout{}
	objs := []client.Object{ml}
	changes := halvingChanges("n1", "n2", "n3")
	for _, ch := range changes {
		read[ch.Node] = autoNML(ch.Node, ml, a100(0).layout("7g.80gb@0"))
		objs = append(objs, read[ch.Node].DeepCopy())
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	var gets atomic.Int64
	a := &AutoPlanner{Client: c, APIReader: countingReader{Reader: c, gets: &gets}}
	if _, n, err := a.write(t.Context(), read, liveGenerations(t, c), changes, nil, nil); err != nil || n != 3 {
		t.Errorf("write: %d written, error %v; want 3", n, err)
	}
	if got := gets.Load(); got != 1 {
		t.Errorf("%d reads of MigLayout auto, want 1", got)
	}
}

// TestWriteSkipsOnlyTheNodesOfADeletedMigLayout: Auto MigLayout "gone" was
// deleted since the plan read its node n1 (its NodeMigLayout not yet
// collected): n1's change is not written, and that fails nothing: n2's
// change, of MigLayout "auto", is written.
func TestWriteSkipsOnlyTheNodesOfADeletedMigLayout(t *testing.T) {
	gone, ml := autoMigLayout("gone", nil), autoMigLayout("auto", nil)
	read := map[string]*v1alpha1.NodeMigLayout{
		"n1": autoNML("n1", gone, a100(0).layout("7g.80gb@0")),
		"n2": autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml, read["n1"].DeepCopy(), read["n2"].DeepCopy()).
		WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build()
	changes := halvingChanges("n1", "n2")
	a := &AutoPlanner{Client: c}
	if _, n, err := a.write(t.Context(), read, liveGenerations(t, c), changes, nil, nil); err != nil || n != 1 {
		t.Errorf("write: %d written, error %v; want 1 (n2's change) and no error", n, err)
	}
	wantSpecGPUs(t, c, map[string]int{"n1": 0, "n2": 1})
}

// wantSpecGPUs checks how many GPUs each node's NodeMigLayout spec lists.
func wantSpecGPUs(t *testing.T, c client.Client, want map[string]int) {
	t.Helper()
	for node, n := range want {
		var got v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), types.NamespacedName{Name: node}, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.GPUs) != n {
			t.Errorf("%s's spec GPUs %v, want %d written", node, got.Spec.GPUs, n)
		}
	}
}
