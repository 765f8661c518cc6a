package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRepartitionedBeyondTheRows: a rollout over more nodes than the
// status has rows for (maxNodeRows) changes them all at once; the node
// whose name sorts last, with no row, is done first. Its Repartitioned
// event is recorded all the same, naming the GPU that changed.
func TestRepartitionedBeyondTheRows(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	objs := []client.Object{ml}
	nodes := maxNodeRows + 6
	for i := range nodes {
		n := fmt.Sprintf("n%03d", i)
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(10 * nodes)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("n%03d", nodes-1)
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: last}, &nml); err != nil {
		t.Fatal(err)
	}
	if nml.Spec.GPUs[0].Layout != halvesLayout {
		t.Fatalf("%s desired %q, want %s", last, nml.Spec.GPUs[0].Layout, halvesLayout)
	}
	var ml2 v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &ml2); err != nil {
		t.Fatal(err)
	}
	for _, row := range ml2.Status.Nodes {
		if row.Node == last {
			t.Fatalf("%s has a row; the test needs one beyond the rows", last)
		}
	}
	nml.Status.GPUs = inventory(a100(0).layout(halvesLayout))
	if err := c.Status().Update(ctx, &nml); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventRepartitioned) {
			got = append(got, e)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "node "+last+" holds the desired layout; changed: gpu 0") {
		t.Errorf("Repartitioned events %q, want one for %s naming gpu 0", got, last)
	}
}

// TestRepartitionedBeyondTheRowsWithoutAStatusWrite: a node beyond the
// rows becomes Ready in the pass another node (Ready before) starts
// changing: counts, rows and messages stay as they were, so no status is
// written; the Repartitioned event of the node beyond the rows is recorded
// all the same.
func TestRepartitionedBeyondTheRowsWithoutAStatusWrite(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	objs := []client.Object{ml}
	changing := maxNodeRows + 6
	for i := range changing + 1 {
		n := fmt.Sprintf("n%03d", i)
		st := a100(0).layout(wholeLayout)
		if i == changing {
			st = a100(0).layout(halvesLayout) // Ready from the start
		}
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, wholeLayout, "")).status(st).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(20 * changing)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	set := func(name, layout string) {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &nml); err != nil {
			t.Fatal(err)
		}
		nml.Status.GPUs = inventory(a100(0).layout(layout))
		if err := c.Status().Update(ctx, &nml); err != nil {
			t.Fatal(err)
		}
	}
	last := fmt.Sprintf("n%03d", changing-1)
	set(last, halvesLayout)                          // done
	set(fmt.Sprintf("n%03d", changing), wholeLayout) // reset behind the controller's back: changing again
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	var before, after v1alpha1.MigLayout
	if err := c.Get(ctx, req.NamespacedName, &before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, &after); err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion {
		t.Fatal("the status was written; the test needs a pass that writes none")
	}
	var got []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventRepartitioned) {
			got = append(got, e)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "node "+last) {
		t.Errorf("Repartitioned events %q, want one for %s", got, last)
	}
}
