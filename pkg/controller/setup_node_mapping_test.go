package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNodeMigLayoutsMapsToConcerned: a Node's event, or its agent Lease's,
// wakes the MigLayouts whose node selector matches the node's labels and
// the one that controls its NodeMigLayout (here one whose selector does
// not parse, which holds it), not the others; a Lease of no agent wakes
// none, and one of a node that is gone wakes its NodeMigLayout's
// controller only.
func TestNodeMigLayoutsMapsToConcerned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	poolA := staticMigLayout("pool-a", "uid-a", "a")
	poolB := staticMigLayout("pool-b", "uid-b", "b")
	anyPool := migLayout("any-pool").selector(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "pool", Operator: metav1.LabelSelectorOpExists}}}).build()
	invalid := migLayout("invalid").selector(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "pool", Operator: "Near"}}}).build()
	invalid.UID = "uid-invalid"
	objs := []client.Object{poolA, poolB, &anyPool, &invalid,
		node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "b"}),
		ownedBy(nodeMigLayout("n2").build(), &invalid), ownedBy(nodeMigLayout("gone").build(), poolA)}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()}
	meta := func(name string, labels map[string]string) client.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	lease := func(node string) client.Object {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "miglayout-system", Name: v1alpha1.AgentLeasePrefix + node}}
	}
	tests := map[string]struct {
		obj  client.Object
		want []string
	}{
		"a node of pool a":                       {meta("n1", map[string]string{"pool": "a"}), []string{"any-pool", "pool-a"}},
		"a node no MigLayout selects":            {meta("n3", map[string]string{"team": "x"}), nil},
		"a node a broken MigLayout holds":        {meta("n2", map[string]string{"pool": "b"}), []string{"any-pool", "invalid", "pool-b"}},
		"the agent Lease of a node of pool a":    {lease("n1"), []string{"any-pool", "pool-a"}},
		"the agent Lease of a node that is gone": {lease("gone"), []string{"pool-a"}},
		"a Lease of no agent": {&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "miglayout-system", Name: "other"}},
			nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, req := range r.nodeMigLayouts(ctx, tc.obj) {
				got = append(got, req.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MigLayouts woken (-want +got):\n%s", diff)
			}
		})
	}

	// Where the node's NodeMigLayout cannot be read, every MigLayout.
	failing := &Reconciler{Client: interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build(),
		interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.NodeMigLayout); ok {
				return errors.New("connection refused")
			}
			return c.Get(ctx, key, obj, opts...)
		}})}
	if got := failing.nodeMigLayouts(ctx, meta("n3", nil)); len(got) != 4 {
		t.Errorf("with the NodeMigLayout unreadable, %d MigLayouts woken, want all 4", len(got))
	}
}
