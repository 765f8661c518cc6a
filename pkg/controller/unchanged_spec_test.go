package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestReconcileLeavesUnchangedSpecAlone: a NodeMigLayout whose spec already
// says what the rules ask is not written again: passes of a MigLayout that
// changes nothing make no API writes. One of an earlier release, without
// the spec-written-by annotation, is written once, for the annotation.
func TestReconcileLeavesUnchangedSpecAlone(t *testing.T) {
	for name, ann := range map[string]map[string]string{
		"annotated":             {v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeStatic)},
		"of an earlier release": nil,
	} {
		t.Run(name, func(t *testing.T) { testReconcileLeavesUnchangedSpecAlone(t, ann) })
	}
}

func testReconcileLeavesUnchangedSpecAlone(t *testing.T, annotations map[string]string) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves": profiles 3g.40gb:2`)).
		status(a100(0).layout(halvesLayout)).build(), ml)
	nml.Annotations = annotations
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if annotations == nil {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	var before v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &before); err != nil {
		t.Fatal(err)
	}
	if got := before.Annotations[v1alpha1.AnnotationSpecWrittenBy]; got != string(v1alpha1.ModeStatic) {
		t.Errorf("spec-written-by %q, want Static", got)
	}
	for range 2 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	var after v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("NodeMigLayout written (resourceVersion %s -> %s) though its spec was already the desired one", before.ResourceVersion, after.ResourceVersion)
	}
}
