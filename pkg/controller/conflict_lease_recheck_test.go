package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestConflictedNodeInChangeRechecksItsAgent: n1's change toward MigLayout
// a's spec is under way when MigLayout b also selects n1. a carries the
// change (judged as on a node without conflict), so it also asks for the
// pass at which n1's agent Lease runs out, as it does without b: a Lease
// running out sends no event, and without that pass a dead agent left n1
// Progressing ("Repartitioning") until something else woke a. The pass
// then finds the agent lost.
func TestConflictedNodeInChangeRechecksItsAgent(t *testing.T) {
	for name, conflict := range map[string]bool{"alone": false, "in conflict": true} {
		t.Run(name, func(t *testing.T) {
			now := leaseTestStart
			a := staticMigLayout("a", "uid-a", "a")
			objs := []client.Object{a, node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).
					status(a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")).build(), a),
				agentLease("n1", now, 40)}
			if conflict {
				objs = append(objs, staticMigLayout("b", "uid-b", "a"))
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), AgentLeases: renewingLeases(&now, agentLease("n1", now, 40))}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
			res, err := r.Reconcile(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter <= 40*time.Second || res.RequeueAfter > 45*time.Second {
				t.Fatalf("RequeueAfter %v, want the pass just after the 40 s Lease runs out", res.RequeueAfter)
			}
			now = now.Add(res.RequeueAfter)
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.MigLayout
			if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
				t.Fatal(err)
			}
			if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d == nil || d.Reason != v1alpha1.ReasonAgentLost {
				t.Errorf("Degraded %+v at the asked-for pass, want reason %s", d, v1alpha1.ReasonAgentLost)
			}
		})
	}
}
