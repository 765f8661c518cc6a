package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSpecProblemsKeptWhileNodeJoins: a rule for T4s matches no GPU of the
// one node selected (Degraded, RuleMatchesNoGPU, one warning). A second
// node joins the pool; until its agent reports, the rule cannot be judged
// on it, and the problem found before stays: Degraded does not go False
// and come back, nor is the warning recorded again meanwhile. Once the node
// reports (A100s again) it is still there, and not told again. Also where
// the controller restarted (or the lead changed) before the node joined:
// the new process keeps the problems the Degraded condition names for this
// generation that still hold on the nodes that have reported (they were in
// the old process's memory only, and Degraded went False, then True again
// with a second warning).
func TestSpecProblemsKeptWhileNodeJoins(t *testing.T) {
	for name, restart := range map[string]bool{"one process": false, "restarted before the node joins": true} {
		t.Run(name, func(t *testing.T) {
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.Rules = append(rules(rule("t4").product("Tesla-T4").counts("1g.10gb", 1)), ml.Spec.Rules...)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
				node("n1", map[string]string{"pool": "a"}),
				ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), ml)).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			rec := events.NewFakeRecorder(100)
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
			ctx := context.Background()
			warnings := 0
			degraded := func(step string) {
				t.Helper()
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
					t.Fatal(err)
				}
				for len(rec.Events) > 0 {
					if e := <-rec.Events; strings.Contains(e, v1alpha1.ReasonRuleMatchesNoGPU) {
						warnings++
					}
				}
				var got v1alpha1.MigLayout
				if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
					t.Fatal(err)
				}
				if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d == nil || d.Status != "True" || d.Reason != v1alpha1.ReasonRuleMatchesNoGPU {
					t.Errorf("%s: Degraded %+v, want True, RuleMatchesNoGPU", step, d)
				}
			}
			degraded("one node")
			if restart {
				r = &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
			}
			if err := c.Create(ctx, node("n2", map[string]string{"pool": "a"})); err != nil {
				t.Fatal(err)
			}
			degraded("a second node, not reported yet")
			if warnings != 1 {
				t.Errorf("%d RuleMatchesNoGPU warnings before the second node reported, want 1", warnings)
			}
			var n2 v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n2"}, &n2); err != nil {
				t.Fatal(err)
			}
			n2.Status.GPUs = []v1alpha1.GPUStatus{a100(0).layout(wholeLayout).build()}
			if err := c.Status().Update(ctx, &n2); err != nil {
				t.Fatal(err)
			}
			// Its message now names both nodes' GPUs; the problem, the rule
			// that matches no GPU, is the one told already.
			degraded("the second node reported")
			if warnings != 1 {
				t.Errorf("%d RuleMatchesNoGPU warnings after the second node reported, want 1", warnings)
			}
		})
	}
}

// TestKeptSpecProblemsDropWhenFixed: the problem kept while n2 has not
// reported goes once the nodes that have reported no longer show it (n1's
// GPU is replaced by a T4, which the t4 rule now decides), though n2
// still has not reported.
func TestKeptSpecProblemsDropWhenFixed(t *testing.T) {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.Rules = append(rules(rule("t4").product("Tesla-T4").migOff()), ml.Spec.Rules...)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml,
		node("n1", map[string]string{"pool": "a"}),
		ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, "")).status(a100(0).layout(halvesLayout)).build(), ml)).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	ctx := context.Background()
	degraded := func() *metav1.Condition {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
	}
	if d := degraded(); d == nil || d.Reason != v1alpha1.ReasonRuleMatchesNoGPU {
		t.Fatalf("Degraded %+v, want RuleMatchesNoGPU", d)
	}
	if err := c.Create(ctx, node("n2", map[string]string{"pool": "a"})); err != nil {
		t.Fatal(err)
	}
	if d := degraded(); d == nil || d.Reason != v1alpha1.ReasonRuleMatchesNoGPU {
		t.Fatalf("n2 not reported: Degraded %+v, want RuleMatchesNoGPU kept", d)
	}
	var n1 v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &n1); err != nil {
		t.Fatal(err)
	}
	n1.Status.GPUs = []v1alpha1.GPUStatus{{Index: 0, Product: "Tesla-T4", Phase: v1alpha1.PhaseReady}}
	if err := c.Status().Update(ctx, &n1); err != nil {
		t.Fatal(err)
	}
	if d := degraded(); d != nil && d.Status == metav1.ConditionTrue && d.Reason == v1alpha1.ReasonRuleMatchesNoGPU {
		t.Errorf("n1 now has a T4: Degraded %+v, want the kept problem gone", d)
	}
}
