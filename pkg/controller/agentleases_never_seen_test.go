package controller

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNeverSeenLeaseTakesNoSlot: a controller starts after n1's agent died
// and its Lease went (the chart reinstalled, or the Node made again while
// no controller ran); n1 reported before, n2's agent renews its Lease.
// With maxNodesChanging 1, n1 is given no turn (Unconfirmed at first,
// AgentLost a lease duration after the start), and n2 is changed.
func TestNeverSeenLeaseTakesNoSlot(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := leaseTestStart
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.MaxNodesChanging = ptr.To[int32](1)
	objs := []client.Object{ml, agentLease("n2", now, 40)}
	for _, n := range []string{"n1", "n2"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}),
			ownedBy(nodeMigLayout(n).spec(specGPU(0, "7g.80gb@0", "")).status(a100(0).layout("7g.80gb@0")).build(), ml))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	l := leasesOnClock(&now)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: l, Now: func() time.Time { return now }}
	for range 3 {
		var lease coordinationv1.Lease // n2's agent renews; n1's holds none
		if err := c.Get(ctx, types.NamespacedName{Namespace: "miglayout-system", Name: v1alpha1.AgentLeaseName("n2", "")}, &lease); err != nil {
			t.Fatal(err)
		}
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
		if err := c.Update(ctx, &lease); err != nil {
			t.Fatal(err)
		}
		l.Observe(&lease)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Second)
	}
	layout := func(n string) string {
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: n}, &nml); err != nil {
			t.Fatal(err)
		}
		return nml.Spec.GPUs[0].Layout
	}
	if got := layout("n1"); got != "7g.80gb@0" {
		t.Errorf("n1 (no Lease seen) was given %q, want its layout kept", got)
	}
	if got := layout("n2"); got == "7g.80gb@0" {
		t.Errorf("n2 (renewing) kept %q, want the rule's layout: the slot went to n1", got)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	lost := false
	for _, row := range got.Status.Nodes {
		if row.Node == "n1" {
			lost = row.Phase == v1alpha1.PhaseUnknown
			t.Logf("n1's row: %s %q", row.Phase, row.Message)
		}
	}
	if !lost || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionDegraded) ||
		meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded).Reason != v1alpha1.ReasonAgentLost {
		t.Errorf("n1 not reported lost a minute after the start; conditions %+v", got.Status.Conditions)
	}
}
