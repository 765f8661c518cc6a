package controller

import (
	"fmt"

	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// BenchmarkStaticReconcile: one Reconcile of a Static MigLayout selecting
// 1000 nodes of 8 A100s, each node's NodeMigLayout written and its agent
// reporting every GPU Ready on the layout (the steady state a resync or a
// node's status change reconciles). The client is controller-runtime's fake
// (its reads deep-copy every object), so the figure bounds the controller's
// own work from above.
func BenchmarkStaticReconcile(b *testing.B) {
	ctx := klog.NewContext(b.Context(), logr.Discard())
	ml := staticMigLayout("a", "uid-a", "a")
	halves := "3g.40gb@0,3g.40gb@4"
	objs := []client.Object{ml}
	for i := range 1000 {
		name := fmt.Sprintf("node-%04d", i)
		var specs []v1alpha1.GPUSpec
		var status []*gpuBuilder
		for g := range int32(8) {
			specs = append(specs, specGPU(g, halves, `rule "halves": profiles 3g.40gb:2`))
			status = append(status, a100(g).layout(halves))
		}
		nml := ownedBy(nodeMigLayout(name).spec(specs...).status(status...).build(), ml)
		objs = append(objs, node(name, map[string]string{"pool": "a"}), nml)
	}
	s := testScheme(&testing.T{})
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: s, Recorder: events.NewFakeRecorder(100000)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		b.Fatal(err)
	}
	before := resourceVersions(b, c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if diff := cmp.Diff(before, resourceVersions(b, c)); diff != "" {
		b.Fatalf("the steady passes wrote objects (resourceVersions, -before +after):\n%s", diff)
	}
}

// resourceVersions are the resourceVersions of c's MigLayouts and
// NodeMigLayouts, by kind and name.
func resourceVersions(b *testing.B, c client.Client) map[string]string {
	b.Helper()
	out := map[string]string{}
	var mls v1alpha1.MigLayoutList
	var nmls v1alpha1.NodeMigLayoutList
	if err := c.List(b.Context(), &mls); err != nil {
		b.Fatal(err)
	}
	if err := c.List(b.Context(), &nmls); err != nil {
		b.Fatal(err)
	}
	for _, ml := range mls.Items {
		out["MigLayout/"+ml.Name] = ml.ResourceVersion
	}
	for _, nml := range nmls.Items {
		out["NodeMigLayout/"+nml.Name] = nml.ResourceVersion
	}
	return out
}
